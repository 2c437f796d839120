package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchboardhq/switchboard/internal/opfile"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

const secretsSynopsis = `secrets reencrypt [--secret-key-file FILE] [--previous-secret-key-file FILE] [--db FILE]
  (seals every webhook secret not yet sealed with SWITCHBOARD_SECRET_ENCRYPTION_KEY or the key file:
   plaintext ones, and during a key rotation those the previous key sealed)`

func runSecrets(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, secretsSynopsis, subcommand{"reencrypt", secretsReencrypt})
}

func secretsReencrypt(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "secrets reencrypt", secretsSynopsis)
	db := dbFlag(fs, env)
	var keys keyFiles
	secretKeyFlags(fs, env, &keys)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	key, _, err := keys.load(env)
	if err != nil {
		return err
	}
	if key == nil {
		return usageErr("no secret encryption key: set SWITCHBOARD_SECRET_ENCRYPTION_KEY or --secret-key-file (generate one with: openssl rand -base64 32)")
	}
	// Opening with the key already refuses one that does not open the secrets
	// sealed before, so two keys never end up mixed in one database.
	s, err := openKeyedStore(ctx, env, *db, keys, false)
	if err != nil {
		return err
	}
	defer s.Close()
	n, err := s.ReencryptSecrets(ctx, "human:cli")
	if err != nil {
		return err
	}
	if n == 0 {
		// Opening with a previous key may have sealed a setting's secret already.
		fmt.Fprintln(env.stdout, "every stored secret is sealed with the current key already: nothing to re-encrypt")
		return nil
	}
	fmt.Fprintf(env.stdout, "encrypted %d secrets with the current key\n", n)
	return nil
}

// credentialName is the systemd credential the key is read from when neither the
// variable nor a file is given (LoadCredential=secret-key:/etc/switchboard/secret-key).
const credentialName = server.SecretKeyCredential

// maxKeyFile bounds a key file: a key is 64 hex digits or 44 base64 characters,
// so anything much longer is the wrong file (or /dev/zero).
const maxKeyFile = 4 << 10

// keyFiles name the secret encryption keys: the current one, and during a key
// rotation the one being rotated out.
type keyFiles struct{ current, previous string }

// previousCredentialName is the systemd credential the rotated-out key is read
// from, when the unit loads one for the rotation.
const previousCredentialName = "previous-secret-key"

// load resolves both keys. nil current means no key: secrets are stored as
// plaintext. A previous key needs a current one.
func (k keyFiles) load(env *environ) (current []byte, previous [][]byte, err error) {
	current, err = loadKey(env, k.current, "SWITCHBOARD_SECRET_ENCRYPTION_KEY", credentialName, "--secret-key-file")
	if err != nil {
		return nil, nil, err
	}
	old, err := loadKey(env, k.previous, "SWITCHBOARD_PREVIOUS_SECRET_ENCRYPTION_KEY", previousCredentialName,
		"--previous-secret-key-file")
	if err != nil {
		return nil, nil, err
	}
	if old != nil {
		if current == nil {
			return nil, nil, usageErr("a previous secret key needs the new one too: set SWITCHBOARD_SECRET_ENCRYPTION_KEY or --secret-key-file")
		}
		previous = [][]byte{old}
	}
	return current, previous, nil
}

// loadKey resolves one key: the key file (flag, or its env), else the variable
// holding the key itself, else the systemd credential in $CREDENTIALS_DIRECTORY.
// nil means none. Both a file and the variable is a mistake, not a choice.
func loadKey(env *environ, file, variable, credential, flagName string) ([]byte, error) {
	inline := env.getenv(variable)
	if file != "" && inline != "" {
		return nil, usageErr("give the key one way: %s or %s, not both", variable, flagName)
	}
	if file == "" && inline == "" {
		if dir := env.getenv("CREDENTIALS_DIRECTORY"); dir != "" {
			if p := filepath.Join(dir, credential); fileExists(p) {
				file = p
			}
		}
	}
	switch {
	case inline != "":
		k, err := store.ParseSecretKey(inline)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", variable, err)
		}
		return k, nil
	case file != "":
		b, err := opfile.Read(file, maxKeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flagName, err)
		}
		k, err := store.ParseSecretKey(string(b))
		if err != nil {
			return nil, fmt.Errorf("secret key file %s: %w", file, err)
		}
		// Whoever reads the key opens every webhook secret: say so when anyone can.
		// (The package makes it readable by the service's group, on purpose.)
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o007 != 0 {
			fmt.Fprintf(env.stderr, "warning: secret key file %s can be read by any user (mode %04o); chmod o-rwx it\n",
				file, fi.Mode().Perm())
		}
		return k, nil
	}
	return nil, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// secretKeyFlags adds --secret-key-file and --previous-secret-key-file to a flag set.
func secretKeyFlags(fs interface {
	StringVar(*string, string, string, string)
}, env *environ, k *keyFiles) {
	fs.StringVar(&k.current, "secret-key-file", envOr(env, "SWITCHBOARD_SECRET_KEY_FILE", ""),
		"file holding the 32-byte secret encryption key, hex or base64 (env SWITCHBOARD_SECRET_KEY_FILE; "+
			"default: $CREDENTIALS_DIRECTORY/"+credentialName+" when systemd provides it)")
	fs.StringVar(&k.previous, "previous-secret-key-file", envOr(env, "SWITCHBOARD_PREVIOUS_SECRET_KEY_FILE", ""),
		"during a key rotation, the key being replaced: it still opens what it sealed until 'secrets reencrypt' "+
			"reseals that with the new key (env SWITCHBOARD_PREVIOUS_SECRET_KEY_FILE; default: "+
			"$CREDENTIALS_DIRECTORY/"+previousCredentialName+" when systemd provides it)")
}

// openKeyedStore opens the database with the secret key, for commands that write
// secrets; existing: one that must be there already (see openExistingWith).
func openKeyedStore(ctx context.Context, env *environ, path string, keys keyFiles, existing bool) (*store.Store, error) {
	key, previous, err := keys.load(env)
	if err != nil {
		return nil, err
	}
	opts := store.Options{SecretKey: key, PreviousSecretKeys: previous}
	if existing {
		return openExistingWith(ctx, env, path, opts)
	}
	return openStoreWith(ctx, env, path, opts)
}
