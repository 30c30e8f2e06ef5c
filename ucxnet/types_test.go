package ucxnet

import (
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ucxnet/ucxnet/internal/engine/memengine"
	"github.com/ucxnet/ucxnet/internal/session"
)

// sessionTypes maps the ucxnet types that the face converts or copies to
// the session types that stand for them.
var sessionTypes = map[reflect.Type]reflect.Type{
	reflect.TypeFor[Config]():       reflect.TypeFor[session.Config](),
	reflect.TypeFor[Addr]():         reflect.TypeFor[session.Addr](),
	reflect.TypeFor[ConnStats]():    reflect.TypeFor[session.ConnStats](),
	reflect.TypeFor[Stats]():        reflect.TypeFor[session.Stats](),
	reflect.TypeFor[LaneStats]():    reflect.TypeFor[session.LaneStats](),
	reflect.TypeFor[LaneInfo]():     reflect.TypeFor[session.LaneInfo](),
	reflect.TypeFor[Snapshot]():     reflect.TypeFor[session.Snapshot](),
	reflect.TypeFor[UCXLibrary]():   reflect.TypeFor[session.UCXLibrary](),
	reflect.TypeFor[Dialer]():       reflect.TypeFor[session.Dialer](),
	reflect.TypeFor[ListenConfig](): reflect.TypeFor[session.ListenConfig](),
	reflect.TypeFor[*Transport]():   reflect.TypeFor[*session.Transport](),
}

// asSession returns the session type that stands for t in a field: t's
// own, or a slice of it, or t itself.
func asSession(t reflect.Type) reflect.Type {
	if s, ok := sessionTypes[t]; ok {
		return s
	}
	if t.Kind() == reflect.Slice {
		if s, ok := sessionTypes[t.Elem()]; ok {
			return reflect.SliceOf(s)
		}
	}
	return t
}

// fieldList describes t's fields in order: name, type (as the session's,
// through asSession) and tag.
func fieldList(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		out = append(out, fmt.Sprintf("%s %v `%s`", f.Name, asSession(f.Type), f.Tag))
	}
	return out
}

// TestTypesMatchSession checks that each of ucxnet's data types, and its
// Dialer and ListenConfig, has the fields of the session's type it stands
// for, in the same order and with the same tags: a field added to one side
// only fails here. (Where the face converts, the compiler checks the names
// and types too, but not the JSON tags, which the stats socket's answer is
// encoded with on one side and decoded with on the other.)
func TestTypesMatchSession(t *testing.T) {
	for face, sess := range sessionTypes {
		if face.Kind() != reflect.Struct {
			continue
		}
		t.Run(face.Name(), func(t *testing.T) {
			require.Equal(t, fieldList(sess), fieldList(face))
		})
	}
}

// fill sets every settable field of v, and of the structs, slices and maps
// in it, to a value other than its zero.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Pointer:
		// left nil: a pointer field (a Transport) is the caller's to set
	default:
		panic(fmt.Sprintf("fill: %v", v.Type()))
	}
}

// requireAllSet fails unless every field of the struct v is set.
func requireAllSet(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		require.False(t, rv.Field(i).IsZero(), "%T.%s not copied", v, rv.Type().Field(i).Name)
	}
}

// TestSnapshotCopiesEveryField checks that a session Snapshot becomes
// ucxnet's with every field (the face copies it field by field), and
// that both encode to the same JSON.
func TestSnapshotCopiesEveryField(t *testing.T) {
	var s session.Snapshot
	fill(reflect.ValueOf(&s).Elem())
	got := snapshot(s)
	requireAllSet(t, got)
	want, err := json.Marshal(s)
	require.NoError(t, err)
	have, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(have))
}

// TestDialerListenConfigCopyEveryField checks that the face hands the
// session every field of its Dialer and ListenConfig.
func TestDialerListenConfigCopyEveryField(t *testing.T) {
	tr := &Transport{t: &session.Transport{}}
	var d Dialer
	fill(reflect.ValueOf(&d).Elem())
	d.Transport = tr
	requireAllSet(t, d)
	requireAllSet(t, d.session())

	var lc ListenConfig
	fill(reflect.ValueOf(&lc).Elem())
	lc.Transport = tr
	requireAllSet(t, lc)
	requireAllSet(t, lc.session())
}

// A conn's and a listener's addresses are ucxnet's Addr, on either
// engine and lane, as a type assertion on them expects.
func TestAddrsAreUcxnets(t *testing.T) {
	for _, lane := range []string{LaneUCX, LaneTCP} {
		t.Run(lane, func(t *testing.T) {
			forEachEngine(t, Config{Lane: lane}, func(t *testing.T, p *pair) {
				c, s := p.conns(t)
				defer c.Close()
				defer s.Close()
				for _, a := range []net.Addr{c.LocalAddr(), c.RemoteAddr(), s.LocalAddr(), s.RemoteAddr(), p.ln.Addr()} {
					require.IsType(t, Addr{}, a)
				}
				require.Equal(t, c.LocalAddr(), s.RemoteAddr())
				require.Equal(t, Addr{Name: p.ln.Addr().String()}, p.ln.Addr())
			})
		})
	}
}

// Every key of the JSON that `ucxnet ls --json`, the stats socket and
// PublishExpvar give is snake_case, as the conns' keys always were:
// one style, whatever the field's Go name.
func TestJSONKeysOneStyle(t *testing.T) {
	n := memengine.NewNetwork()
	p := newPairOf(t, Config{StatsDir: StatsOff}, func(cfg Config) *Transport { return newMemTransport(t, n, cfg) })
	c, s := p.conns(t) // the snapshot has a conn
	defer c.Close()
	defer s.Close()
	var keys func(v any, at string)
	keys = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				require.Regexp(t, `^[a-z][a-z0-9_]*$`, k, "key %q at %s", k, at)
				keys(x, at+"."+k)
			}
		case []any:
			for _, x := range v {
				keys(x, at+"[]")
			}
		}
	}
	for _, v := range []any{p.server.Snapshot(), LaneInfo{Lane: LaneTCP, Endpoints: []string{"127.0.0.1:1"}}} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var m any
		require.NoError(t, json.Unmarshal(b, &m))
		keys(m, fmt.Sprintf("%T", v))
	}
}
