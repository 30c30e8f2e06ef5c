package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// pskCmd writes a new random pre-shared key.
var pskCmd = &command{
	Name:  "psk",
	Args:  "FILE",
	Short: "write a new random pre-shared key to FILE (mode 0600), for UCXNET_PSK_FILE",
	Long: `Writes 32 random bytes (crypto/rand), hex-encoded, to FILE with mode 0600,
for UCXNET_PSK_FILE or Dialer.PSK/ListenConfig.PSK. An existing FILE is kept
unless --force is given; "-" writes the key to standard output. Give the
same file to the listener and its dialers. A generated key cannot be
guessed, online or offline; a key a person chose can be guessed online,
one guess per handshake (see docs/RELIABILITY.md, "Security model and its limits").`,
	Setup: func(fs *flag.FlagSet) func(ctx context.Context, sio *stdio, args []string) error {
		force := fs.Bool("force", false, "replace FILE if it exists")
		return func(_ context.Context, sio *stdio, args []string) error {
			if len(args) != 1 {
				return usagef("want one FILE (\"-\" for standard output)")
			}
			key := newPSK()
			if args[0] == "-" {
				_, err := fmt.Fprintln(sio.Out, key)
				return err
			}
			if err := writePSK(args[0], key, *force); err != nil {
				return err
			}
			fmt.Fprintf(sio.Err, "wrote a 256-bit key to %s; use it with UCXNET_PSK_FILE=%s\n", args[0], args[0])
			return nil
		}
	},
}

// newPSK returns 32 random bytes in hex: text, so that no byte of it is
// a newline the key file's reader would strip.
func newPSK() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("no randomness: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// writePSK writes key and a newline to path with mode 0600: a new file,
// or with force a file renamed over the old one.
func writePSK(path, key string, force bool) error {
	data := []byte(key + "\n")
	if !force {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists (--force replaces it)", path)
		}
		if err != nil {
			return err
		}
		return writeClose(f, data)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".psk-*") // mode 0600
	if err != nil {
		return err
	}
	if err := writeClose(f, data); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

func writeClose(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
