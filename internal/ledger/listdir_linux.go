package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// Where getdents64's fields are in each entry.
const (
	inoOff    = int(unsafe.Offsetof(syscall.Dirent{}.Ino))
	reclenOff = int(unsafe.Offsetof(syscall.Dirent{}.Reclen))
	nameOff   = int(unsafe.Offsetof(syscall.Dirent{}.Name))
)

// readDirNames lists the folder open as f with each entry's inode number,
// read from getdents64 directly: os.File.Readdirnames drops the inode
// numbers, and a stat of each of 200,000 files to learn them again would
// cost a system call each.
func readDirNames(f *os.File) (names []string, inos []uint64, err error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 64<<10)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			for {
				n, rerr = syscall.ReadDirent(int(fd), buf)
				if !errors.Is(rerr, syscall.EINTR) {
					return true
				}
			}
		}); err != nil {
			return nil, nil, err
		}
		if rerr != nil {
			return nil, nil, &os.PathError{Op: "readdirent", Path: f.Name(), Err: rerr}
		}
		if n <= 0 {
			return names, inos, nil
		}
		for b := buf[:n]; len(b) > 0; {
			// struct linux_dirent64: the inode number, an offset, the
			// record's length, a type, then the name, NUL-terminated and
			// padded.
			if len(b) < nameOff {
				return nil, nil, fmt.Errorf("readdirent %s: a %d-byte entry", f.Name(), len(b))
			}
			reclen := int(binary.NativeEndian.Uint16(b[reclenOff:]))
			if reclen < nameOff || reclen > len(b) {
				return nil, nil, fmt.Errorf("readdirent %s: an entry of %d bytes in %d", f.Name(), reclen, len(b))
			}
			ino := binary.NativeEndian.Uint64(b[inoOff:])
			name := b[nameOff:reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			b = b[reclen:]
			if ino == 0 || string(name) == "." || string(name) == ".." {
				// An inode number of 0 marks an entry deleted but not yet
				// removed from the block (as Go's own reader skips it).
				continue
			}
			names = append(names, string(name))
			inos = append(inos, ino)
		}
	}
}
