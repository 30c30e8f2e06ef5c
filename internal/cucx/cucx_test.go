//go:build linux && cgo

package cucx

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// openWorker opens a worker with extra settings on top of the environment.
func openWorker(t testing.TB, settings ...Setting) *Worker {
	t.Helper()
	w, err := Open(settings)
	if err != nil {
		t.Fatalf("open worker: %v", err)
	}
	t.Cleanup(w.Close)
	return w
}

// tlsSettings is what the tests run under: $UCX_TLS as given, with shared
// memory allowed under PEER error handling (as ucxnet does).
func tlsSettings() []Setting {
	return []Setting{{"MM_ERROR_HANDLING", "y"}}
}

// TestRealAddressesValidate: addresses of real workers, with each transport
// set and address format this UCX can produce, pass ValidateAddress. With
// CUCX_UPDATE_TESTDATA set it also stores them as golden addresses of the
// UCX release in use (testdata/addr/RELEASE), which address_test.go checks
// in every build.
func TestRealAddressesValidate(t *testing.T) {
	cases := map[string][]Setting{
		"env":        nil,
		"tcp":        {{"TLS", "tcp"}},
		"sm":         {{"TLS", "sm"}},
		"all":        {{"TLS", "all"}},
		"tcp-v2":     {{"TLS", "tcp"}, {"ADDRESS_VERSION", "v2"}},
		"sm-v2":      {{"TLS", "sm"}, {"ADDRESS_VERSION", "v2"}},
		"all-v2":     {{"TLS", "all"}, {"ADDRESS_VERSION", "v2"}},
		"sm-debug":   {{"TLS", "sm"}, {"ADDRESS_DEBUG_INFO", "y"}},
		"all-v2-dbg": {{"TLS", "all"}, {"ADDRESS_VERSION", "v2"}, {"ADDRESS_DEBUG_INFO", "y"}},
	}
	update := os.Getenv("CUCX_UPDATE_TESTDATA") != ""
	dir := filepath.Join("testdata", "addr", Version())
	if update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			w := openWorker(t, append(tlsSettings(), s...)...)
			a, err := w.Address()
			if err != nil {
				t.Fatal(err)
			}
			if update && name != "env" {
				p := filepath.Join(dir, name+".hex")
				if err := os.WriteFile(p, []byte(hex.EncodeToString(a)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := ValidateAddress(a); err != nil {
				t.Fatalf("real address (%d B) rejected: %v\n%s", len(a), err, hex.Dump(a))
			}
		})
	}
}

// TestStatusStringsMatchUCX: the pure-Go status table is UCX's own text.
func TestStatusStringsMatchUCX(t *testing.T) {
	for s := Status(1); s >= -127; s-- {
		if got, want := StatusString(s), cStatusString(s); got != want {
			t.Errorf("status %d: %q, UCX says %q", s, got, want)
		}
	}
}

// TestConnectRejectsBadAddress: Connect never hands a malformed address to
// UCX (each of these aborted the process before the check).
func TestConnectRejectsBadAddress(t *testing.T) {
	w := openWorker(t, tlsSettings()...)
	real, err := w.Address()
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), real...)
	for i := 0; i < 4; i++ {
		flipped[i] ^= 0xff
	}
	random := make([]byte, 200)
	rand.New(rand.NewSource(1)).Read(random)
	for name, a := range map[string][]byte{
		"nil": nil, "ff": {0xff}, "random200": random, "flipped4": flipped,
		"zeroed": make([]byte, len(real)), "truncated": real[:len(real)-1],
		"trailing": append(append([]byte(nil), real...), 0),
	} {
		ep, err := w.Connect(a)
		if !errors.Is(err, ErrBadAddress) || ep.Valid() {
			t.Errorf("%s: Connect = %v, %v; want ErrBadAddress", name, ep.Valid(), err)
		}
	}
}

// ---- ucp_ep_create on accepted mutations, in a child process --------------

const childEnv = "CUCX_EPCREATE_CHILD"

// mutations returns the addresses the ep-create child tries: every
// single-byte change of real from a fixed set, plus random ones.
func mutations(real []byte, seed int64) [][]byte {
	var out [][]byte
	rng := rand.New(rand.NewSource(seed))
	for i := range real {
		vals := []byte{0x00, 0xff, real[i] ^ 0x01, real[i] ^ 0x80, real[i] ^ 0x40, real[i] ^ 0x20,
			byte(rng.Intn(256)), byte(rng.Intn(256))}
		for _, v := range vals {
			if v == real[i] {
				continue
			}
			m := append([]byte(nil), real...)
			m[i] = v
			out = append(out, m)
		}
	}
	return out
}

// fuzzCorpus returns the inputs stored in testdata/fuzz/FuzzValidateAddress.
func fuzzCorpus(t testing.TB) [][]byte {
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzValidateAddress", "*"))
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "[]byte(") || !strings.HasSuffix(line, ")") {
				continue
			}
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, []byte(s))
		}
	}
	return out
}

// TestEPCreateChild is the child half of TestEPCreateOnAcceptedAddresses:
// it runs only when re-executed with CUCX_EPCREATE_CHILD set, inside fresh
// network, IPC, PID and mount namespaces (so that a mutated address can
// reach nothing but this process). It creates an endpoint to every
// accepted candidate, printing "TRY i" before and "OK i" after each.
func TestEPCreateChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestEPCreateOnAcceptedAddresses")
	}
	from, _ := strconv.Atoi(os.Getenv("CUCX_EPCREATE_FROM"))
	target := openWorker(t, tlsSettings()...)
	w := openWorker(t, tlsSettings()...)
	real, err := target.Address()
	if err != nil {
		t.Fatal(err)
	}
	if raw := os.Getenv("CUCX_EPCREATE_RAW"); raw != "" {
		// What UCX does with an address ValidateAddress rejects.
		a, _ := hex.DecodeString(raw)
		if raw == "flipped4" {
			a = append([]byte(nil), real...)
			for i := 0; i < 4; i++ {
				a[i] ^= 0xff
			}
		}
		_, err := w.connectUnchecked(a)
		fmt.Printf("RAW survived: %v\n", err)
		return
	}
	cands := append([][]byte{real}, mutations(real, 1)...)
	cands = append(cands, fuzzCorpus(t)...)
	out := bufio.NewWriter(os.Stdout)
	var evs []Event
	accepted := 0
	for i := from; i < len(cands); i++ {
		a := cands[i]
		if ValidateAddress(a) != nil {
			continue
		}
		accepted++
		fmt.Fprintf(out, "TRY %d %x\n", i, a)
		out.Flush()
		ep, err := w.Connect(a)
		for k := 0; k < 20; k++ {
			evs, _ = w.Progress(evs[:0], 64, nil)
			evs, _ = target.Progress(evs[:0], 64, nil)
		}
		if err == nil {
			_ = w.CloseEP(ep, true)
			for k := 0; k < 20; k++ {
				evs, _ = w.Progress(evs[:0], 64, nil)
				evs, _ = target.Progress(evs[:0], 64, nil)
			}
		}
		fmt.Fprintf(out, "OK %d %v\n", i, err)
		out.Flush()
	}
	fmt.Fprintf(out, "DONE %d accepted of %d\n", accepted, len(cands))
	out.Flush()
}

// TestEPCreateOnAcceptedAddresses: what ValidateAddress accepts must not
// crash ucp_ep_create. Mutations of a real address (and the stored fuzz
// corpus) that pass validation are handed to UCX in a child process; an
// abort shows up as a failed child, reported with the address that did it.
func TestEPCreateOnAcceptedAddresses(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	if testing.Short() {
		t.Skip("short")
	}
	if os.Getuid() != 0 {
		t.Skip("needs root for the namespaces that keep mutated addresses from reaching anything")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	type crash struct {
		idx  int
		addr string
		tail string
	}
	var crashes []crash
	from := 0
	for round := 0; round < 30; round++ {
		cmd := exec.Command("unshare", "-n", "-i", "-p", "-f", "-m", "--mount-proc", "sh", "-c",
			`mount -t tmpfs tmpfs /dev/shm && ip link set lo up && exec "$0" "$@"`,
			os.Args[0], "-test.run=^TestEPCreateChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), childEnv+"=1", "CUCX_EPCREATE_FROM="+strconv.Itoa(from),
			"UCX_LOG_LEVEL=fatal")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Skipf("unshare: %v", err)
		}
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(120 * time.Second):
			_ = cmd.Process.Kill()
			err = <-done
			err = fmt.Errorf("timed out: %v", err)
		}
		lines := strings.Split(stdout.String(), "\n")
		last, lastAddr, okLast := -1, "", -1
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) >= 3 && f[0] == "TRY" {
				last, _ = strconv.Atoi(f[1])
				lastAddr = f[2]
			}
			if len(f) >= 2 && f[0] == "OK" {
				okLast, _ = strconv.Atoi(f[1])
			}
			if strings.HasPrefix(l, "DONE") {
				t.Log(l)
			}
		}
		if err == nil && strings.Contains(stdout.String(), "DONE") {
			break
		}
		if last < 0 || okLast == last {
			t.Fatalf("child failed before trying an address: %v\n%s\n%s", err, stdout.String(), stderr.String())
		}
		tail := stderr.String()
		if len(tail) > 600 {
			tail = tail[len(tail)-600:]
		}
		crashes = append(crashes, crash{last, lastAddr, tail})
		from = last + 1
	}
	for _, c := range crashes {
		t.Errorf("accepted address #%d crashed ucp_ep_create: %s\n%s", c.idx, c.addr, c.tail)
	}
}

// TestUCXAbortsOnBadAddress shows why Connect validates: UCX 1.13's
// ucp_ep_create, handed addresses that ValidateAddress rejects, kills the
// process (run in a child).
func TestUCXAbortsOnBadAddress(t *testing.T) {
	if os.Getenv(childEnv) != "" || testing.Short() {
		t.Skip()
	}
	if os.Getuid() != 0 {
		t.Skip("needs root for the namespaces")
	}
	random := make([]byte, 200)
	rand.New(rand.NewSource(1)).Read(random)
	for name, raw := range map[string]string{"ff": "ff", "random200": hex.EncodeToString(random), "flipped4": "flipped4"} {
		cmd := exec.Command("unshare", "-n", "-i", "-p", "-f", "-m", "--mount-proc", "sh", "-c",
			`mount -t tmpfs tmpfs /dev/shm && ip link set lo up && exec "$0" "$@"`,
			os.Args[0], "-test.run=^TestEPCreateChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", "CUCX_EPCREATE_RAW="+raw, "UCX_LOG_LEVEL=fatal")
		out, err := cmd.CombinedOutput()
		survived := err == nil && strings.Contains(string(out), "RAW survived")
		aborted := strings.Contains(string(out), "SIGABRT")
		t.Logf("%s: child exit %v, survived %v, SIGABRT %v", name, err, survived, aborted)
		if !survived && !aborted {
			t.Errorf("%s: child failed without an abort:\n%s", name, out)
		}
	}
}

// ---- REPLY: frames carry their sender's identity --------------------------

type node struct {
	w   *Worker
	evs []Event
}

// pump progresses every node once and returns the frames that arrived.
func pump(t testing.TB, nodes []*node, frames map[*node][]Event, sent map[uint64]bool) {
	for _, n := range nodes {
		n.evs, _ = n.w.Progress(n.evs[:0], 256, nil)
		for _, e := range n.evs {
			switch e.Kind {
			case EventFrame:
				e.Data = nil
				frames[n] = append(frames[n], e)
			case EventSent:
				sent[e.Token] = true
				if e.Err != nil {
					t.Fatalf("zero-copy send failed: %v", e.Err)
				}
			case EventEPError:
				t.Fatalf("endpoint error: %v", e.Err)
			case EventBad:
				t.Fatalf("bad frame")
			}
		}
	}
}

func hdr(tag byte, seq uint64) []byte {
	h := make([]byte, 16)
	binary.LittleEndian.PutUint64(h, seq)
	h[15] = tag
	return h
}

// TestReplyFrom: every frame sent on one endpoint, by every send path,
// arrives with the same non-zero From, starting with the first one sent
// right after ucp_ep_create; frames from another worker carry another.
func TestReplyFrom(t *testing.T) {
	a := &node{w: openWorker(t, tlsSettings()...)}
	b := &node{w: openWorker(t, tlsSettings()...)}
	c := &node{w: openWorker(t, tlsSettings()...)}
	nodes := []*node{a, b, c}
	addrA, err := a.w.Address()
	if err != nil {
		t.Fatal(err)
	}
	epB, err := b.w.Connect(addrA)
	if err != nil {
		t.Fatal(err)
	}
	epC, err := c.w.Connect(addrA)
	if err != nil {
		t.Fatal(err)
	}
	// The first frames go out before any progress: wireup has not started.
	want := map[byte]int{}
	send := func(n *node, ep EP, tag byte, size int) {
		t.Helper()
		if _, err := n.w.Send(ep, hdr(tag, 0), make([]byte, size)); err != nil {
			t.Fatalf("send %c: %v", tag, err)
		}
		want[tag]++
	}
	send(b, epB, 'b', 64)
	send(c, epC, 'c', 64)
	frames := map[*node][]Event{}
	sent := map[uint64]bool{}
	for i := 0; i < 50; i++ {
		pump(t, nodes, frames, sent)
	}
	// Now every path from b: small frames (immediate completion where the
	// transport allows), buffered ones, SendFrames, and zero-copy.
	imm0 := b.w.Stats().ImmSends
	for i := 0; i < 20; i++ {
		send(b, epB, 's', 8)
		send(b, epB, 'm', 900)
		send(c, epC, 'c', 64)
	}
	send(b, epB, 'l', 64<<10)
	big := make([]byte, 256<<10)
	if _, _, err := b.w.SendFrames(epB, hdr('f', 0), 0, 8, 0, big, 32<<10); err != nil {
		t.Fatal(err)
	}
	want['f'] += 8
	zc := make([]byte, 256<<10)
	var pin runtime.Pinner
	pin.Pin(&zc[0])
	defer pin.Unpin()
	_, wait, err := b.w.SendFramesZC(epB, hdr('z', 0), 0, 8, 0, zc, 64<<10, 7)
	if err != nil {
		t.Fatal(err)
	}
	want['z'] += 4
	total := 0
	for _, n := range want {
		total += n
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(frames[a]) < total || (wait && !sent[7]) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames arrived (zc done %v)", len(frames[a]), total, sent[7])
		}
		pump(t, nodes, frames, sent)
	}
	st := b.w.Stats()
	t.Logf("b: %d immediate sends since wireup (%d in all), %d zero-copy frames, %d frames in all",
		st.ImmSends-imm0, st.ImmSends, st.ZCFrames, total)
	got := map[byte]int{}
	var fromB, fromC uintptr
	for _, e := range frames[a] {
		tag := e.Hdr[15]
		got[tag]++
		if e.From == 0 {
			t.Fatalf("frame %c arrived with From 0", tag)
		}
		p := &fromB
		if tag == 'c' {
			p = &fromC
		}
		if *p == 0 {
			*p = e.From
		} else if *p != e.From {
			t.Fatalf("frame %c: From %#x, earlier frames from the same endpoint %#x", tag, e.From, *p)
		}
	}
	for tag, n := range want {
		if got[tag] != n {
			t.Errorf("frames %c: got %d, want %d", tag, got[tag], n)
		}
	}
	if fromB == fromC {
		t.Fatalf("frames from two workers share From %#x", fromB)
	}
	_ = b.w.CloseEP(epB, true)
	_ = c.w.CloseEP(epC, true)
	for i := 0; i < 20; i++ {
		pump(t, nodes, frames, sent)
	}
}

// connectedPair opens two workers and an endpoint from b to a.
func connectedPair(t *testing.T) (a, b *node, ep EP) {
	t.Helper()
	a = &node{w: openWorker(t, tlsSettings()...)}
	b = &node{w: openWorker(t, tlsSettings()...)}
	addrA, err := a.w.Address()
	if err != nil {
		t.Fatal(err)
	}
	if ep, err = b.w.Connect(addrA); err != nil {
		t.Fatal(err)
	}
	return a, b, ep
}

// TestInflightBytes: a buffered send UCX has not completed counts its
// payload until it does.
func TestInflightBytes(t *testing.T) {
	a, b, ep := connectedPair(t)
	// Before wireup a send cannot complete at once: it stays pending.
	pending, err := b.w.Send(ep, hdr('x', 0), make([]byte, 5000))
	if err != nil {
		t.Fatal(err)
	}
	if !pending {
		t.Log("the send completed at once: nothing to count")
	}
	if st := b.w.Stats(); pending && st.InflightBytes != 5000 {
		t.Fatalf("pending send: InflightBytes %d, want 5000", st.InflightBytes)
	}
	frames := map[*node][]Event{}
	deadline := time.Now().Add(10 * time.Second)
	for len(frames[a]) < 1 || b.w.Stats().Inflight > 0 {
		if time.Now().After(deadline) {
			t.Fatal("send did not complete")
		}
		pump(t, []*node{a, b}, frames, map[uint64]bool{})
	}
	if st := b.w.Stats(); st.InflightBytes != 0 {
		t.Fatalf("after completion: InflightBytes %d", st.InflightBytes)
	}
	_ = b.w.CloseEP(ep, true)
	pump(t, []*node{a, b}, frames, map[uint64]bool{})
}

// TestCaptureEPInfo writes real ucp_ep_print_info texts to testdata (with
// CUCX_UPDATE_TESTDATA set) and checks Transports on the live one.
func TestCaptureEPInfo(t *testing.T) {
	tl := os.Getenv("UCX_TLS")
	a, b, ep := connectedPair(t)
	defer func() { _ = b.w.CloseEP(ep, true); pump(t, []*node{a, b}, map[*node][]Event{}, map[uint64]bool{}) }()
	info := b.w.EPInfo(ep)
	got := Transports(info)
	if len(got) == 0 {
		t.Fatalf("no transports in\n%s", info)
	}
	t.Logf("UCX_TLS=%q: %v", tl, got)
	if os.Getenv("CUCX_UPDATE_TESTDATA") != "" && (tl == "tcp" || tl == "sm") {
		if err := os.WriteFile(filepath.Join("testdata", "epinfo", tl+".txt"), []byte(info), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// setReply turns UCP_AM_SEND_FLAG_REPLY on or off (for the benchmark).
func (w *Worker) setReply(on bool) {
	if on {
		w.w.am_flags |= 1 // UCP_AM_SEND_FLAG_REPLY
	} else {
		w.w.am_flags &^= 1
	}
}

// BenchmarkPingPong64 measures a 64-byte round trip between two workers
// driven by one goroutine, with and without the REPLY flag.
func BenchmarkPingPong64(b *testing.B) {
	for _, reply := range []bool{false, true} {
		b.Run(fmt.Sprintf("reply=%v", reply), func(b *testing.B) {
			x := &node{w: openWorker(b, tlsSettings()...)}
			y := &node{w: openWorker(b, tlsSettings()...)}
			x.w.setReply(reply)
			y.w.setReply(reply)
			ax, _ := x.w.Address()
			ay, _ := y.w.Address()
			epXY, err := x.w.Connect(ay)
			if err != nil {
				b.Fatal(err)
			}
			epYX, err := y.w.Connect(ax)
			if err != nil {
				b.Fatal(err)
			}
			h := hdr('p', 0)
			payload := make([]byte, 64)
			// wait progresses both workers until to has a frame.
			wait := func(to, other *node) {
				for {
					got := false
					to.evs, _ = to.w.Progress(to.evs[:0], 64, nil)
					for _, e := range to.evs {
						got = got || e.Kind == EventFrame
					}
					other.evs, _ = other.w.Progress(other.evs[:0], 64, nil)
					if got {
						return
					}
				}
			}
			round := func() {
				if _, err := x.w.Send(epXY, h, payload); err != nil {
					b.Fatal(err)
				}
				wait(y, x)
				if _, err := y.w.Send(epYX, h, payload); err != nil {
					b.Fatal(err)
				}
				wait(x, y)
			}
			for i := 0; i < 100; i++ { // wireup
				round()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				round()
			}
			b.StopTimer()
			_ = x.w.CloseEP(epXY, true)
			_ = y.w.CloseEP(epYX, true)
			for i := 0; i < 20; i++ {
				x.w.Progress(nil, 64, nil)
				y.w.Progress(nil, 64, nil)
			}
		})
	}
}

// BenchmarkSmallFrames64 measures one-way 64-byte frame throughput (in
// windows of 64 frames), with and without the REPLY flag.
func BenchmarkSmallFrames64(b *testing.B) {
	for _, reply := range []bool{false, true} {
		b.Run(fmt.Sprintf("reply=%v", reply), func(b *testing.B) {
			x := &node{w: openWorker(b, tlsSettings()...)}
			y := &node{w: openWorker(b, tlsSettings()...)}
			x.w.setReply(reply)
			ay, _ := y.w.Address()
			ep, err := x.w.Connect(ay)
			if err != nil {
				b.Fatal(err)
			}
			h := hdr('t', 0)
			payload := make([]byte, 64)
			got := 0
			run := func(n int) {
				sentN := 0
				for sentN < n {
					for k := 0; k < 64 && sentN < n; k++ {
						if _, err := x.w.Send(ep, h, payload); err != nil {
							b.Fatal(err)
						}
						sentN++
					}
					for got < sentN {
						x.evs, _ = x.w.Progress(x.evs[:0], 256, nil)
						y.evs, _ = y.w.Progress(y.evs[:0], 256, nil)
						for _, e := range y.evs {
							if e.Kind == EventFrame {
								got++
							}
						}
					}
				}
				got = 0
			}
			run(1000) // wireup
			imm0 := x.w.Stats().ImmSends
			b.ResetTimer()
			run(b.N)
			b.StopTimer()
			b.ReportMetric(float64(x.w.Stats().ImmSends-imm0)/float64(b.N), "imm/op")
			_ = x.w.CloseEP(ep, true)
			for i := 0; i < 20; i++ {
				x.w.Progress(nil, 64, nil)
				y.w.Progress(nil, 64, nil)
			}
		})
	}
}

// TestBufferPool: the send buffers of a burst go back to the worker's pool
// when UCX is done with them, beyond the few each size class keeps, up to
// 64 MiB in all (fresh memory costs a page fault per 4 KiB, which made 16
// conns of 1 MiB writes over tcp run at a quarter of one conn's rate); the
// next burst reuses them without malloc, and TrimPool gives the surplus
// back.
func TestBufferPool(t *testing.T) {
	a, b, ep := connectedPair(t)
	const size, burst = 256 << 10, 300 // 75 MiB of copies: more than the pool keeps
	payload := make([]byte, size)
	// Before wireup no send completes at once: each takes a buffer.
	for i := range burst {
		if _, err := b.w.Send(ep, hdr('p', uint64(i)), payload); err != nil {
			t.Fatal(err)
		}
	}
	st := b.w.Stats()
	if st.Inflight != burst {
		t.Skipf("only %d of %d sends were pending before wireup (this UCX_TLS=%q completed some at once): the burst would not fill the pool", st.Inflight, burst, os.Getenv("UCX_TLS"))
	}
	allocs := st.BufAllocs
	frames := map[*node][]Event{}
	deadline := time.Now().Add(20 * time.Second)
	for len(frames[a]) < burst || b.w.Stats().Inflight > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d frames arrived", len(frames[a]), burst)
		}
		pump(t, []*node{a, b}, frames, map[uint64]bool{})
	}
	const bufBytes = size + 256 // a class's buffers hold 2^c bytes and a header's slack
	st = b.w.Stats()
	t.Logf("after the burst: %d buffers allocated, %d bytes pooled", st.BufAllocs, st.PooledBytes)
	if st.PooledBytes < 64<<20-bufBytes || st.PooledBytes > 64<<20 {
		t.Fatalf("%d bytes pooled after a 75 MiB burst, want 64 MiB (less one buffer at most)", st.PooledBytes)
	}
	// The next burst (pending or not) takes no new memory while the pool
	// has buffers.
	for i := range st.PooledBytes / bufBytes {
		if _, err := b.w.Send(ep, hdr('q', i), payload); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.w.Stats().BufAllocs; got != allocs {
		t.Fatalf("a burst that the pool covers allocated %d buffers", got-allocs)
	}
	for b.w.Stats().Inflight > 0 {
		if time.Now().After(deadline) {
			t.Fatal("second burst did not complete")
		}
		pump(t, []*node{a, b}, frames, map[uint64]bool{})
	}
	b.w.TrimPool()
	if got := b.w.Stats().PooledBytes; got != 32*bufBytes {
		t.Fatalf("after TrimPool %d bytes pooled, want the 32 buffers a 256 KiB class keeps (%d)", got, 32*bufBytes)
	}
	_ = b.w.CloseEP(ep, true)
	pump(t, []*node{a, b}, frames, map[uint64]bool{})
}
