package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// These tests play another local user attacking the directory registry
// of this one (the victim). They need root, to create that user and act
// as it; the attacker's steps run in a child process with the attacker's
// credentials.

// attacker is a throwaway unprivileged user.
type attacker struct {
	name     string
	uid, gid int
}

// newAttacker creates a throwaway user with useradd and removes it when t
// ends. It skips t, saying why, when that is impossible.
func newAttacker(t *testing.T) attacker {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a second, unprivileged user (useradd) and run the attacker's steps as that user; run the tests as root to check the defence against other local users")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skipf("skipped: useradd not found (%v); cannot create a second user to attack with", err)
	}
	userdel, err := exec.LookPath("userdel")
	if err != nil {
		t.Skipf("skipped: userdel not found (%v); would not be able to remove the test user", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "ucxatk" + hex.EncodeToString(b[:])
	out, err := exec.Command(useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	require.NoError(t, err, "useradd %s: %s", name, out)
	t.Cleanup(func() {
		if out, err := exec.Command(userdel, name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := user.Lookup(name)
	require.NoError(t, err)
	uid, err := strconv.Atoi(u.Uid)
	require.NoError(t, err)
	gid, err := strconv.Atoi(u.Gid)
	require.NoError(t, err)
	require.NotZero(t, uid)
	return attacker{name: name, uid: uid, gid: gid}
}

// run runs the shell script as the attacker and returns its output and
// error.
func (a attacker) run(script string) (string, error) {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/nonexistent"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(a.uid), Gid: uint32(a.gid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs the script as the attacker and fails t if it fails.
func (a attacker) must(t *testing.T, script string) {
	t.Helper()
	out, err := a.run(script)
	require.NoError(t, err, "attacker step %q: %s", script, out)
}

// sharedTmp returns a fresh world-writable sticky directory, a /tmp of the
// test's own, and makes it the victim's TMPDIR.
func sharedTmp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "ucxnet-sharedtmp-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o777|os.ModeSticky))
	t.Setenv("TMPDIR", d)
	return d
}

// victimEnv gives the victim a private home and no XDG_RUNTIME_DIR (as in
// a cron job or an "su" shell), the case where the old default fell back
// to TMPDIR/ucxnet-UID.
func victimEnv(t *testing.T) (home string) {
	home = t.TempDir()
	require.NoError(t, os.Chmod(home, 0o755)) // a usual home: readable, not writable by others
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	t.Setenv(EnvRegistryDir, "")
	t.Setenv(EnvRegistry, "")
	return home
}

func roundTrip(t *testing.T, r Registry) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, r.Register(ctx, testEntry("victim-svc", "")))
	e, err := r.Resolve(ctx, "victim-svc")
	require.NoError(t, err)
	require.Equal(t, "victim-svc", e.Name)
	require.NoError(t, r.Unregister(ctx, "victim-svc"))
}

// TestAttackSquatTmpDefault: another user creates the directory the old
// default used (TMPDIR/ucxnet-UID, mode 0700) before the victim. The
// victim must still listen and dial: its default is not there.
func TestAttackSquatTmpDefault(t *testing.T) {
	a := newAttacker(t)
	tmp := sharedTmp(t)
	home := victimEnv(t)
	squat := filepath.Join(tmp, fmt.Sprintf("ucxnet-%d", os.Geteuid()))
	a.must(t, fmt.Sprintf("mkdir -m 0700 %q && mkdir -m 0777 %q", squat, filepath.Join(tmp, "ucxnet")))

	r, err := FromEnv()
	require.NoError(t, err, "the victim's default registry must not depend on %s", tmp)
	require.Equal(t, "dir:"+filepath.Join(home, ".cache", "ucxnet"), r.String())
	roundTrip(t, r)

	// The squatted directory itself is refused with a clear error.
	_, err = NewDir(squat)
	require.ErrorIs(t, err, ErrUnsafeDir)
	require.ErrorContains(t, err, fmt.Sprintf("owned by uid %d", a.uid))
	require.ErrorContains(t, err, EnvRegistry+"=dir:/path")

	// And the attacker can neither list nor plant entries in the
	// victim's registry.
	require.NoError(t, r.Register(context.Background(), testEntry("secret", "")))
	dir := r.(*Dir).Path()
	if out, err := a.run(fmt.Sprintf("ls %q", dir)); err == nil {
		t.Fatalf("attacker listed the victim's registry: %s", out)
	}
	if out, err := a.run(fmt.Sprintf("echo '{}' > %q", filepath.Join(dir, "planted.entry"))); err == nil {
		t.Fatalf("attacker wrote into the victim's registry: %s", out)
	}
}

// TestAttackSymlinkToVictimDir: another user points TMPDIR/ucxnet-UID (or
// any name the victim may use) at a directory the victim owns with mode
// 0755, which anyone can read, or at a private one. Links are not followed.
func TestAttackSymlinkToVictimDir(t *testing.T) {
	a := newAttacker(t)
	tmp := sharedTmp(t)
	victimEnv(t)
	public := filepath.Join(tmp, "victim-public")
	require.NoError(t, os.Mkdir(public, 0o755))
	require.NoError(t, os.Chmod(public, 0o755))
	private := filepath.Join(tmp, "victim-private")
	require.NoError(t, os.Mkdir(private, 0o700))

	link1 := filepath.Join(tmp, fmt.Sprintf("ucxnet-%d", os.Geteuid()))
	link2 := filepath.Join(tmp, "reg")
	a.must(t, fmt.Sprintf("ln -s %q %q && ln -s %q %q", public, link1, private, link2))

	for _, link := range []string{link1, link2} {
		_, err := NewDir(link)
		require.ErrorIs(t, err, ErrUnsafeDir, link)
		require.ErrorContains(t, err, "symbolic link")
		require.ErrorContains(t, err, fmt.Sprintf("owned by uid %d", a.uid))
		_, err = Open("dir:" + link)
		require.ErrorIs(t, err, ErrUnsafeDir, link)
	}
	for _, d := range []string{public, private} {
		des, err := os.ReadDir(d)
		require.NoError(t, err)
		require.Empty(t, des, "nothing may be written through the link into %s", d)
	}
	fi, err := os.Stat(public)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "the link's target must not be touched")

	// A directory the attacker made writable to all, even one the victim
	// owns, is refused: entries may have been planted in it.
	planted := filepath.Join(tmp, "victim-open")
	require.NoError(t, os.Mkdir(planted, 0o777))
	require.NoError(t, os.Chmod(planted, 0o777))
	a.must(t, fmt.Sprintf("echo '{}' > %q", filepath.Join(planted, "x.entry")))
	_, err = NewDir(planted)
	require.ErrorIs(t, err, ErrUnsafeDir)
	require.ErrorContains(t, err, "writable by group or others")

	// The default is unaffected.
	r, err := FromEnv()
	require.NoError(t, err)
	roundTrip(t, r)
}

// TestAttackRuntimeDir: XDG_RUNTIME_DIR names a directory another user
// owns (or opened to all); the default passes over it.
func TestAttackRuntimeDir(t *testing.T) {
	a := newAttacker(t)
	tmp := sharedTmp(t)
	home := victimEnv(t)
	xdg := filepath.Join(tmp, "run-user")
	a.must(t, fmt.Sprintf("mkdir -m 0777 %q", xdg))
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	_, err := DefaultDirErr()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, ".cache", "ucxnet"), DefaultDir())
	r, err := FromEnv()
	require.NoError(t, err)
	roundTrip(t, r)
	_, err = os.Lstat(filepath.Join(xdg, "ucxnet"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestAttackSwapDirUnderParent: another user owns the parent of the
// victim's registry directory. After the victim's NewDir has checked the
// directory, that user renames it away and puts a directory of theirs,
// with a planted entry, in its place. The victim must go on using the
// directory it checked: it does not resolve or list the planted entry,
// and its own entries land in its own directory, not in the attacker's.
func TestAttackSwapDirUnderParent(t *testing.T) {
	a := newAttacker(t)
	tmp := sharedTmp(t)
	victimEnv(t)
	parent := filepath.Join(tmp, "attacker-parent")
	a.must(t, fmt.Sprintf("mkdir -m 0755 %q", parent))
	regPath := filepath.Join(parent, "reg")
	d, err := NewDir(regPath)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, d.Register(ctx, testEntry("before", "svc")))

	planted := Entry{Name: "svc-a", Service: "svc", Address: []byte("attacker"), PID: 1, Host: "elsewhere"}
	data, err := json.Marshal(planted)
	require.NoError(t, err)
	moved := filepath.Join(parent, "moved")
	a.must(t, fmt.Sprintf("mv %q %q && mkdir -m 0777 %q && printf '%%s' '%s' > %q",
		regPath, moved, regPath, data, filepath.Join(regPath, entryFileName("svc-a"))))

	_, err = d.Resolve(ctx, "svc-a")
	require.ErrorIs(t, err, ErrNotFound, "the victim resolved the attacker's planted entry")
	got, err := d.Instances(ctx, "svc")
	require.NoError(t, err)
	require.Len(t, got, 1, "the victim listed the attacker's planted entry: %+v", got)
	require.Equal(t, "before", got[0].Name)
	require.NoError(t, d.Register(ctx, testEntry("after", "svc")))

	out, err := a.run(fmt.Sprintf("ls -A %q", regPath))
	require.NoError(t, err, out)
	require.Equal(t, entryFileName("svc-a"), strings.TrimSpace(out), "the victim wrote into the attacker's directory")
	des, err := os.ReadDir(moved)
	require.NoError(t, err)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	require.Subset(t, names, []string{entryFileName("before"), entryFileName("after")})
	require.NoError(t, d.Unregister(ctx, "after"))
	_, err = os.Lstat(filepath.Join(moved, entryFileName("after")))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A new NewDir on the path sees the attacker's directory and refuses.
	_, err = NewDir(regPath)
	require.ErrorIs(t, err, ErrUnsafeDir)
}
