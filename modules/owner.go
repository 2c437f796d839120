package modules

import (
	"fmt"
	"os"
	"slices"
	"syscall"
)

// checkOwner refuses a file or directory on a module's executable path owned by
// a user other than root or the one Switchboard runs as: that user could swap
// the module for their own program, which serve would then run with its grants.
func checkOwner(path string, fi os.FileInfo, owners []uint32) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("cannot read the owner of %s", path)
	}
	if owners == nil {
		owners = []uint32{0, uint32(os.Geteuid())}
	}
	if !slices.Contains(owners, st.Uid) {
		return fmt.Errorf("%s is owned by uid %d: it and every directory above it must be owned by root "+
			"or by the user Switchboard runs as (uid %d); chown it", path, st.Uid, os.Geteuid())
	}
	return nil
}
