//go:build !unix

package watch

import "os"

// statFile returns the size of the file at path; without inodes a replaced
// file is noticed only when it is shorter.
func statFile(path string) (inode uint64, size int64, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, err
	}
	return 0, fi.Size(), nil
}

// inodeOf is 0: no inodes here.
func inodeOf(os.FileInfo) uint64 { return 0 }

// lockFile does not lock where flock is missing.
func lockFile(string) (unlock func(), err error) { return func() {}, nil }
