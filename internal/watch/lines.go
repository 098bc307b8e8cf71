package watch

import (
	"bufio"
	"errors"
	"io"
)

// readLines reads whole lines from r, starting at offset and stopping at
// size: at least one whole line when there is one, then more while the
// chunk stays within maxBytes. A last line without its newline is not
// part of the chunk — Claude Code is still writing it. The chunk ends with
// '\n' or is empty.
func readLines(r io.ReaderAt, offset, size int64, maxBytes int) ([]byte, error) {
	if size <= offset {
		return nil, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(r, offset, size-offset), 64<<10)
	var chunk []byte
	for len(chunk) < maxBytes || len(chunk) == 0 {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it whole (copied
			// first: the next read reuses the buffer).
			head := append([]byte(nil), line...)
			rest, rerr := br.ReadBytes('\n')
			line, err = append(head, rest...), rerr
		}
		if errors.Is(err, io.EOF) {
			return chunk, nil // a partial line, or nothing, is left
		}
		if err != nil {
			return nil, err
		}
		chunk = append(chunk, line...)
	}
	return chunk, nil
}
