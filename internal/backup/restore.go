package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/recallhq/recall/pkg/events"
	"github.com/recallhq/recall/pkg/retry"
)

// RestoreOptions configure a restore.
type RestoreOptions struct {
	// Shards, when not 0, is the shard count the target's services are
	// configured with (RECALL_SHARDS); a backup of another count is
	// refused.
	Shards int
	// Force deletes the target's Recall streams first (their live
	// tombstones are re-applied after the restore).
	Force bool
	// ErasedFrom are more tombstones to re-apply (ErasedFrom reads them
	// from newer backups).
	ErasedFrom []events.Tombstone
	// Progress, when set, is called as each stream is done.
	Progress func(stream string, done, total int)
	// Log receives the re-applied erases (nil: none).
	Log *slog.Logger
}

// Report is what a restore did.
type Report struct {
	Streams  int
	Messages uint64
	Bytes    int64
	// Deleted are the target's streams Force deleted.
	Deleted []string
	// Erased are the receipts of the re-applied tombstones; a receipt
	// with parts removed data the restore brought back.
	Erased  []events.EraseReceipt
	Elapsed time.Duration
}

// Restore restores the backup in dir into nc's server; see the package
// comment. It changes nothing on the target when the backup does not
// check out or the target is not empty (without Force). An error after
// the first stream was restored leaves the streams restored until then
// (the error says which); restoring again with Force replaces them.
func Restore(ctx context.Context, nc *nats.Conn, dir string, o RestoreOptions) (Report, error) {
	start := time.Now()
	var rep Report
	m, err := ReadManifest(dir)
	if err != nil {
		return rep, err
	}
	if err := Verify(dir, m, o.Shards); err != nil {
		return rep, err
	}
	existing, err := recallStreams(ctx, nc)
	if err != nil {
		return rep, err
	}
	var targetTombs []events.Tombstone
	if len(existing) > 0 {
		if !o.Force {
			Order(existing)
			return rep, fmt.Errorf("%w: the server at %s holds %d of Recall's streams (%s): restore into an empty server or data directory, or pass --force to delete them first (their tombstones are re-applied after the restore)",
				ErrNotEmpty, nc.ConnectedUrlRedacted(), len(existing), abbreviate(existing, 4))
		}
		if targetTombs, err = liveTombstones(ctx, nc); err != nil {
			return rep, err
		}
		if err := deleteStreams(ctx, nc, existing); err != nil {
			return rep, err
		}
		rep.Deleted = existing
	}
	for i, s := range m.Streams {
		if err := restoreStream(ctx, nc, dir, s); err != nil {
			return rep, fmt.Errorf("%w (restored %d of %d streams; the target holds a partial restore: fix the cause and run the restore again with --force)", err, i, len(m.Streams))
		}
		rep.Streams++
		rep.Messages += s.Messages
		rep.Bytes += s.Bytes
		if o.Progress != nil {
			o.Progress(s.Name, i+1, len(m.Streams))
		}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rep.Erased, err = reapply(ctx, nc, m.Shards, merge(m.Tombstones, targetTombs, o.ErasedFrom), log)
	rep.Elapsed = time.Since(start)
	if err != nil {
		return rep, fmt.Errorf("%w (every stream is restored; run the restore again with --force to retry the erases)", err)
	}
	return rep, nil
}

// Verify checks a backup against its manifest without a server: every
// stream file present with its size and checksum, the transcript's shard
// streams those of the manifest's shard count, and, when shards is not 0,
// that count the caller's.
func Verify(dir string, m Manifest, shards int) error {
	if len(m.Streams) == 0 {
		return fmt.Errorf("%w: the manifest in %s lists no streams", ErrInvalid, dir)
	}
	if err := checkShards(m); err != nil {
		return err
	}
	if shards != 0 && shards != m.Shards {
		return fmt.Errorf("%w: the backup's transcript has %d shards, the target is configured with %d (RECALL_SHARDS): restore with RECALL_SHARDS=%d and run the services with it (the count is fixed once the streams exist)",
			ErrInvalid, m.Shards, shards, m.Shards)
	}
	for _, s := range m.Streams {
		if err := checkFile(dir, s); err != nil {
			return err
		}
	}
	return nil
}

// checkShards checks that the manifest's shard streams are 0 … Shards-1,
// each recording Shards.
func checkShards(m Manifest) error {
	if m.Shards < 1 || m.Shards > events.MaxShards {
		return fmt.Errorf("%w: the manifest records %d transcript shards", ErrInvalid, m.Shards)
	}
	seen := 0
	for _, s := range m.Streams {
		rest, ok := strings.CutPrefix(s.Name, events.StreamTranscriptShardPrefix)
		if !ok {
			continue
		}
		k, err := strconv.Atoi(rest)
		var c streamConfig
		_ = json.Unmarshal(s.Config, &c)
		if err != nil || k >= m.Shards || c.Metadata[events.ShardsMetadataKey] != strconv.Itoa(m.Shards) {
			return fmt.Errorf("%w: stream %s (recording %s shards) does not belong to a transcript of %d shards, as the manifest says",
				ErrInvalid, s.Name, orNone(c.Metadata[events.ShardsMetadataKey]), m.Shards)
		}
		seen++
	}
	if seen != m.Shards {
		return fmt.Errorf("%w: the manifest records %d transcript shards but lists %d shard streams", ErrInvalid, m.Shards, seen)
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "no"
	}
	return s
}

// checkFile checks one stream file's size and checksum.
func checkFile(dir string, s Stream) error {
	if s.File == "" || filepath.Base(s.File) != s.File {
		return fmt.Errorf("%w: the manifest names the file %q for %s", ErrInvalid, s.File, s.Name)
	}
	f, err := os.Open(filepath.Join(dir, s.File))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s (stream %s) is missing from %s", ErrInvalid, s.File, s.Name, dir)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", s.File, err)
	}
	if n != s.Bytes {
		return fmt.Errorf("%w: %s (stream %s) has %d bytes, the manifest says %d (truncated or replaced)", ErrInvalid, s.File, s.Name, n, s.Bytes)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != s.SHA256 {
		return fmt.Errorf("%w: %s (stream %s) does not match its checksum (corrupt): sha256 %s, the manifest says %s", ErrInvalid, s.File, s.Name, sum, s.SHA256)
	}
	return nil
}

// storageRace is the server's error when its asynchronous clean-up after
// deleting an account's last stream (--force) removes the directory a
// restore is creating; the refused stream is not created, so it is tried
// again.
const storageRace = "could not create storage directory"

// restoreStream restores one stream and checks what the server reports
// against the manifest.
func restoreStream(ctx context.Context, nc *nats.Conn, dir string, s Stream) error {
	var r restoreReply
	err := retry.Policy{First: 100 * time.Millisecond, Max: time.Second, Attempts: 5}.Do(ctx, nil, "restoring "+s.Name, func(ctx context.Context) error {
		f, err := os.Open(filepath.Join(dir, s.File))
		if err != nil {
			return retry.Permanent(err)
		}
		defer f.Close()
		r, err = restore(ctx, nc, s.Name, s.Config, s.State, f)
		if err != nil && !strings.Contains(err.Error(), storageRace) {
			return retry.Permanent(err)
		}
		return err
	})
	if err != nil {
		return err
	}
	// Fewer messages are those that expired since the backup (max age,
	// per-message TTLs); the last sequence stays.
	if r.State.Messages > s.Messages || r.State.LastSeq != s.LastSeq {
		return fmt.Errorf("%w: the restored %s holds %d messages up to sequence %d, the manifest says %d up to %d",
			ErrInvalid, s.Name, r.State.Messages, r.State.LastSeq, s.Messages, s.LastSeq)
	}
	return nil
}

// deleteStreams deletes the named streams.
func deleteStreams(ctx context.Context, nc *nats.Conn, names []string) error {
	for _, n := range names {
		rctx, cancel := context.WithTimeout(ctx, idle)
		err := request(rctx, nc, apiDelete+n, nil, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("deleting %s (--force): %w", n, err)
		}
	}
	return nil
}

// abbreviate lists up to n names and how many more.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
}
