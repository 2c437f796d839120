package modules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loadOne writes a manifest for command and loads it with opts.
func loadOne(t *testing.T, command string, opts LoadOptions) error {
	t.Helper()
	dir := t.TempDir()
	writeManifest(t, dir, "example.json", baseManifest(command))
	opts.LookupEnv = testEnv
	_, err := LoadDir(dir, opts)
	return err
}

// An executable, or a directory above it, owned by another user (here nobody)
// is refused: that user could replace the module with a program of their own.
func TestLoadDirRefusesAnExecutableAnotherUserOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another user needs root; TestLoadDirOwnersAreInjectable covers the rule without it")
	}
	const nobody = 65534
	bin := t.TempDir()
	theirs := writeExecutable(t, bin, "theirs", 0o755)
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	theirDir := filepath.Join(bin, "nobody")
	if err := os.Mkdir(theirDir, 0o755); err != nil {
		t.Fatal(err)
	}
	under := writeExecutable(t, theirDir, "module", 0o755)
	if err := os.Chown(theirDir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	for path, owned := range map[string]string{theirs: theirs, under: theirDir} {
		err := loadOne(t, path, LoadOptions{})
		want := owned + " is owned by uid 65534: it and every directory above it must be owned by root"
		if err == nil || !strings.Contains(err.Error(), `field "command": `+want) {
			t.Fatalf("LoadDir(%s) = %v, want %q", path, err, want)
		}
	}
	if err := loadOne(t, writeExecutable(t, bin, "ours", 0o755), LoadOptions{}); err != nil {
		t.Fatalf("an executable root owns: %v", err)
	}
}

// The allowed owners are the rule's one input: a set without the test's own
// user refuses what that user owns, whoever runs the test.
func TestLoadDirOwnersAreInjectable(t *testing.T) {
	cmd := writeExecutable(t, t.TempDir(), "module", 0o755)
	me := uint32(os.Geteuid())
	err := loadOne(t, cmd, LoadOptions{owners: []uint32{me + 1}})
	if err == nil || !strings.Contains(err.Error(), cmd+" is owned by uid ") {
		t.Fatalf("LoadDir without the owner allowed = %v", err)
	}
	if err := loadOne(t, cmd, LoadOptions{owners: []uint32{0, me}}); err != nil {
		t.Fatalf("LoadDir with the owner allowed = %v", err)
	}
}
