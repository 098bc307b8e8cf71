// Package backup copies everything Recall stores in JetStream into a
// directory and restores it into an empty server, with the erased
// sessions of the backup (and newer ones) erased again.
//
// A backup (Backup) is one snapshot file per stream — every stream whose
// name is Recall's: the transcript's shard streams, the work queues, the
// notifications, every KV bucket (stream KV_<bucket>) and the Object Store
// (OBJ_<bucket>), consumers included — taken with the server's stream
// snapshot API (what `nats stream backup` uses), and a manifest
// (manifest.json, written last) recording the layout (shard count,
// partitions), each stream's configuration, state, message count, last
// sequence, size and SHA-256, the Recall and server versions, the time
// and the live tombstones.
//
// Consistency. Each snapshot is an exact copy of its stream at one point;
// the streams are copied one after the other while Recall keeps serving,
// in an order chosen so that every reference points inside the backup:
// the work queues first, then the derived buckets (memory, index,
// long-term memory, commit records, configuration …), the notifications,
// the transcript shards, the claim-checked bodies and, last, the
// tombstones. A memory's or an extraction request's transcript sequence
// is thus never beyond the transcript copied, and every claim-checked
// record's body is in the backup. Work in flight during the backup (an
// extraction or index update finished between its bucket's copy and the
// transcript's) is not in the derived buckets but its records are in the
// transcript; the session's next record, or `recall extract`/`index`/
// `commit`, brings it up to date. The manifest records when each stream
// was copied (between Started and Finished).
//
// Restore (Restore) checks the whole backup before it changes anything —
// every file present with the size and checksum the manifest records,
// the shard streams matching the manifest's shard count and the caller's
// — and refuses a target that holds any of Recall's streams unless
// RestoreOptions.Force (which deletes them, after reading their
// tombstones). It then restores
// every stream, checks each one's message count and last sequence against
// the manifest, and re-applies every tombstone: those of the backup, the
// target's (Force) and those of newer backups (RestoreOptions.ErasedFrom,
// read with ErasedFrom). An
// erased session thus stays erased when its erase is recorded in any of
// them; an erase whose tombstone expired before the newest of them was
// taken is not known (keep backups no longer than the tombstone TTL, or
// raise RECALL_ERASE_TOMBSTONE_TTL to the backups' retention). Erasing a
// user leaves no tombstone and is not re-applied.
package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/internal/provision"
	"github.com/recallhq/recall/pkg/events"
)

// ManifestFile is the manifest's name in a backup directory.
const ManifestFile = "manifest.json"

// Format is the manifest format this package writes and reads.
const Format = 1

// Manifest describes a backup.
type Manifest struct {
	Format        int       `json:"format"`
	RecallVersion string    `json:"recall_version"`
	ServerVersion string    `json:"server_version"`
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished"`
	// Shards is the transcript's shard count (RECALL_SHARDS).
	Shards int `json:"shards"`
	// Partitions is the extraction partition count (RECALL_PARTITIONS).
	Partitions int      `json:"partitions"`
	Streams    []Stream `json:"streams"`
	// Tombstones are the erased sessions whose tombstones lived at the
	// end of the backup; a restore erases them again.
	Tombstones []events.Tombstone `json:"tombstones"`
}

// Stream is one stream of a backup.
type Stream struct {
	Name      string    `json:"name"`
	File      string    `json:"file"`
	Bytes     int64     `json:"file_bytes"`
	SHA256    string    `json:"sha256"`
	Messages  uint64    `json:"messages"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	Consumers int       `json:"consumers"`
	TakenAt   time.Time `json:"taken_at"`
	// Config and State are the server's, as it reported them with the
	// snapshot; a restore hands them back unchanged.
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// Errors a backup or restore wraps.
var (
	// ErrNotEmpty: the restore target holds Recall's streams.
	ErrNotEmpty = errors.New("the target is not empty")
	// ErrInvalid: the backup is incomplete, corrupt or does not match
	// the target's layout.
	ErrInvalid = errors.New("invalid backup")
	// ErrNoRecall: the server holds none of Recall's streams.
	ErrNoRecall = errors.New("no Recall streams")
	// ErrMemoryStorage: a stream is in memory, which cannot be
	// snapshotted.
	ErrMemoryStorage = errors.New("memory storage cannot be backed up")
)

// IsRecallStream reports whether a stream is Recall's: RECALL_…, or a KV
// bucket or Object Store named RECALL_….
func IsRecallStream(name string) bool {
	for _, p := range []string{"RECALL_", "KV_RECALL_", "OBJ_RECALL_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// rank orders the streams of a backup (see the package comment).
func rank(name string) int {
	switch {
	case name == events.StreamExtract || name == events.StreamCommits:
		return 0
	case name == "KV_"+events.BucketTombstones:
		return 6
	case strings.HasPrefix(name, "KV_"):
		return 1
	case name == events.StreamEvents:
		return 2
	case strings.HasPrefix(name, events.StreamTranscriptShardPrefix), name == provision.StreamLegacyTranscript:
		return 3
	case strings.HasPrefix(name, "OBJ_"):
		return 5
	}
	return 4
}

// Order sorts stream names into the order they are copied in.
func Order(names []string) {
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
}

// Options configure a backup.
type Options struct {
	// Version is recorded as the Recall version (default: the binary's
	// module version and VCS revision).
	Version string
	// Progress, when set, is called as each stream is done.
	Progress func(stream string, done, total int)
}

// Backup copies every Recall stream on nc's server into dir (created;
// it must not hold a manifest already) and writes the manifest last. A
// backup that fails leaves no manifest: the directory is not a backup.
func Backup(ctx context.Context, nc *nats.Conn, dir string, o Options) (Manifest, error) {
	m := Manifest{Format: Format, RecallVersion: o.Version, ServerVersion: nc.ConnectedServerVersion(), Started: time.Now().UTC()}
	if m.RecallVersion == "" {
		m.RecallVersion = buildVersion()
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err == nil {
		return m, fmt.Errorf("%s already holds a backup (%s): choose a new directory", dir, ManifestFile)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return m, err
	}
	names, err := recallStreams(ctx, nc)
	if err != nil {
		return m, err
	}
	if len(names) == 0 {
		return m, fmt.Errorf("%w on the server at %s: nothing to back up", ErrNoRecall, nc.ConnectedUrlRedacted())
	}
	Order(names)
	if err := checkStorage(ctx, nc, names); err != nil {
		return m, err
	}
	for i, name := range names {
		s, err := backupStream(ctx, nc, dir, name)
		if err != nil {
			return m, err
		}
		m.Streams = append(m.Streams, s)
		if o.Progress != nil {
			o.Progress(name, i+1, len(names))
		}
	}
	if m.Tombstones, err = liveTombstones(ctx, nc); err != nil {
		return m, err
	}
	if err := m.readLayout(); err != nil {
		return m, err
	}
	m.Finished = time.Now().UTC()
	return m, writeManifest(dir, m)
}

// backupStream writes one stream's snapshot to dir/<name>.snap.
func backupStream(ctx context.Context, nc *nats.Conn, dir, name string) (Stream, error) {
	s := Stream{Name: name, File: name + ".snap", TakenAt: time.Now().UTC()}
	f, err := os.Create(filepath.Join(dir, s.File))
	if err != nil {
		return s, err
	}
	defer f.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	r, err := snapshot(ctx, nc, name, cw)
	if err != nil {
		return s, err
	}
	if err := f.Sync(); err != nil {
		return s, err
	}
	var st streamState
	if err := json.Unmarshal(r.State, &st); err != nil {
		return s, fmt.Errorf("reading the state of %s: %w", name, err)
	}
	s.Bytes, s.SHA256 = cw.n, hex.EncodeToString(h.Sum(nil))
	s.Messages, s.FirstSeq, s.LastSeq, s.Consumers = st.Messages, st.FirstSeq, st.LastSeq, st.Consumers
	s.Config, s.State = r.Config, r.State
	return s, f.Close()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// recallStreams lists the server's Recall streams.
func recallStreams(ctx context.Context, nc *nats.Conn) ([]string, error) {
	var names []string
	for offset := 0; ; {
		var page struct {
			Total   int      `json:"total"`
			Limit   int      `json:"limit"`
			Streams []string `json:"streams"`
		}
		rctx, cancel := context.WithTimeout(ctx, idle)
		err := request(rctx, nc, apiNames, map[string]int{"offset": offset}, &page)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("listing the streams: %w", err)
		}
		for _, n := range page.Streams {
			if IsRecallStream(n) {
				names = append(names, n)
			}
		}
		offset += len(page.Streams)
		if len(page.Streams) == 0 || offset >= page.Total {
			return names, nil
		}
	}
}

// streamConfig is the part of a stream configuration the checks read.
type streamConfig struct {
	Metadata map[string]string `json:"metadata"`
	Storage  string            `json:"storage"`
}

// checkStorage fails, before anything is copied, when a stream keeps its
// messages in memory: the server snapshots file storage only.
func checkStorage(ctx context.Context, nc *nats.Conn, names []string) error {
	for _, n := range names {
		var info struct {
			Config streamConfig `json:"config"`
		}
		rctx, cancel := context.WithTimeout(ctx, idle)
		err := request(rctx, nc, apiInfo+n, nil, &info)
		cancel()
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", n, err)
		}
		if info.Config.Storage == "memory" {
			return fmt.Errorf("%w: stream %s keeps its messages in memory (RECALL_MEMORY_STORAGE=true), and the server snapshots file storage only; nothing was copied", ErrMemoryStorage, n)
		}
	}
	return nil
}

// readLayout sets Shards and Partitions from the streams' metadata.
func (m *Manifest) readLayout() error {
	m.Shards, m.Partitions = 0, 0
	for _, s := range m.Streams {
		var c streamConfig
		if err := json.Unmarshal(s.Config, &c); err != nil {
			return fmt.Errorf("%w: the configuration of %s: %v", ErrInvalid, s.Name, err)
		}
		if s.Name == events.TranscriptShardStream(0) {
			m.Shards, _ = strconv.Atoi(c.Metadata[events.ShardsMetadataKey])
		}
		if s.Name == events.StreamExtract {
			m.Partitions, _ = strconv.Atoi(c.Metadata[provision.PartitionsMetadataKey])
		}
	}
	return nil
}

// writeManifest writes the manifest atomically (a temporary file renamed).
func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ManifestFile))
}

// buildVersion is the binary's module version and VCS revision.
func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v
}
