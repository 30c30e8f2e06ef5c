package recipes

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ucxnet/ucxnet/registry"
)

// sshKey writes a throwaway ed25519 key pair at path and path.pub.
func sshKey(t *testing.T, keygen, path string) {
	t.Helper()
	if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
}

// serveSSHD serves each conn accepted on ln with its own `sshd -i` (inetd
// mode: the conn is its stdin and stdout), until ln is closed.
func serveSSHD(ln net.Listener, sshd, config string, log io.Writer) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			cmd := exec.Command(sshd, "-i", "-e", "-f", config)
			in, err := cmd.StdinPipe()
			if err != nil {
				return
			}
			cmd.Stdout, cmd.Stderr = c, log
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(log, "sshd:", err)
				return
			}
			go func() { io.Copy(in, c); in.Close() }()
			cmd.Wait()
		}()
	}
}

// TestOpenSSH: OpenSSH's ssh reaches an sshd served over ucxnet with
// ProxyCommand="ucxnet cat NAME", and a command's input and output cross
// intact.
func TestOpenSSH(t *testing.T) {
	const install = "Debian: apt-get install openssh-client openssh-server"
	ssh := lookPath(t, "ssh", install)
	sshd := lookPath(t, "sshd", install, "/usr/sbin", "/usr/local/sbin")
	keygen := lookPath(t, "ssh-keygen", install)
	me, err := user.Current()
	if err != nil {
		t.Skipf("no user name to log in as: %v", err)
	}
	if os.Geteuid() == 0 {
		// sshd as root separates privileges into this directory, which
		// the ssh service creates at boot.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Skipf("sshd as root needs /run/sshd: %v", err)
		}
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "ucxnet")
	goCmd := lookPath(t, "go", "the test builds the ucxnet command with it")
	if out, err := exec.Command(goCmd, "build", "-o", bin, "github.com/ucxnet/ucxnet/cmd/ucxnet").CombinedOutput(); err != nil {
		t.Fatalf("building ucxnet: %v\n%s", err, out)
	}
	sshKey(t, keygen, filepath.Join(dir, "host"))
	sshKey(t, keygen, filepath.Join(dir, "id"))
	pub, err := os.ReadFile(filepath.Join(dir, "id.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(config, []byte(strings.Join([]string{
		"HostKey " + filepath.Join(dir, "host"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"StrictModes no", // the temporary directory's parents are not root's alone
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"PidFile none",
		"LogLevel ERROR",
		"",
	}, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}

	// The registry is a directory, so that `ucxnet cat`, a child process,
	// finds the name.
	regDir := filepath.Join(dir, "registry")
	reg, err := registry.NewDir(regDir)
	if err != nil {
		t.Fatal(err)
	}
	p := newPair(t, reg)
	ln := p.listen(t)
	var log output
	go serveSSHD(ln, sshd, config, &log)

	input := bytes.Repeat([]byte("over ucxnet\n"), 100_000) // 1.2 MB
	cmd := exec.Command(ssh, "-F", "/dev/null", "-i", filepath.Join(dir, "id"),
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ProxyCommand="+bin+" cat -q %h", // the recipe
		"-l", me.Username, ln.Addr().String(), "sha256sum")
	cmd.Env = append(os.Environ(), "UCXNET_REGISTRY=dir:"+regDir, "UCXNET_STATS_DIR=off")
	cmd.Stdin = bytes.NewReader(input)
	var stderr output
	cmd.Stderr = &stderr
	timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh: %v\nssh said: %s\nsshd said: %s", err, stderr.String(), log.String())
	}
	if want := fmt.Sprintf("%x  -\n", sha256.Sum256(input)); string(out) != want {
		t.Fatalf("remote sha256sum printed %q, want %q", out, want)
	}
}
