package pcgroup

import (
	"crypto/rand"
	"encoding/hex"
	"hash/fnv"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// Assign maps every partition 0..partitions-1 to one of members with
// rendezvous (highest random weight) hashing and a bounded load: partitions
// are taken in order, each goes to the highest-scoring member that owns fewer
// than ceil(partitions/len(members)) partitions so far.
//
// The result depends only on the set of members (not their order), so every
// worker that sees the same membership computes the same assignment. When a
// member joins or leaves, most partitions keep their owner. The returned map
// has an entry (possibly empty) for every member; with no members it is empty.
func Assign(members []string, partitions int) map[string][]int {
	out := make(map[string][]int, len(members))
	if len(members) == 0 || partitions <= 0 {
		return out
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	for _, m := range ms {
		out[m] = nil
	}
	limit := (partitions + len(ms) - 1) / len(ms)
	type scored struct {
		member string
		score  uint64
	}
	ranked := make([]scored, len(ms))
	for p := 0; p < partitions; p++ {
		for i, m := range ms {
			ranked[i] = scored{m, score(m, p)}
		}
		slices.SortFunc(ranked, func(a, b scored) int {
			switch {
			case a.score > b.score:
				return -1
			case a.score < b.score:
				return 1
			}
			if a.member < b.member {
				return -1
			}
			return 1
		})
		for _, r := range ranked {
			if len(out[r.member]) < limit {
				out[r.member] = append(out[r.member], p)
				break
			}
		}
	}
	return out
}

// score is the rendezvous weight of member for partition p: FNV-1a of
// "member/p" passed through the splitmix64 finalizer so that similar names
// spread well.
func score(member string, p int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{'/'})
	h.Write([]byte(strconv.Itoa(p)))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

var badMemberChars = regexp.MustCompile(`[^-_a-zA-Z0-9]+`)

// MemberID is a member id from a configured one (characters a KV key
// cannot hold become "_"), or, when it is empty, the hostname and a random
// suffix: unique per process, readable in logs and in the bucket.
func MemberID(configured string) string {
	if configured == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		configured = host + "-" + hex.EncodeToString(b[:])
	}
	return badMemberChars.ReplaceAllString(configured, "_")
}
