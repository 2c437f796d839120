// Package opfile reads the small files an operator names on the command line
// or in a directory (key files, manifests, payload files). Such a path may be
// wrong in ways a careful server refuses instead of obeying: a device that never
// ends (/dev/zero), a named pipe that blocks until someone writes to it, a
// directory. It never reads more than the caller's cap and never blocks on open.
package opfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Read returns the contents of the regular file at path, refusing anything else
// and any file larger than limit bytes. Its errors are *fs.PathError, as os's
// are: they name the path, and the caller adds what the file was for.
func Read(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK makes opening a FIFO return at once instead of waiting for a
	// writer; it changes nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Stat the opened file, not the path, so what is read is what was checked.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("is not a regular file (%s)", kind(fi.Mode()))}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("is larger than %d bytes", limit)}
	}
	return data, nil
}

// kind names a non-regular file's type as the operator would.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "not a plain file"
}
