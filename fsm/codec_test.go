package fsm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// recordTypes are the values stored in bbolt (see recordBuckets).
func recordTypes() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, rb := range recordBuckets {
		t := reflect.TypeOf(rb.new()).Elem()
		out["record "+t.Name()] = t
	}
	return out
}

// codecTypes is every record and every registered command payload.
func codecTypes() map[string]reflect.Type {
	out := recordTypes()
	for ct, p := range payloadTypes {
		out["payload "+string(ct)] = reflect.TypeOf(p)
	}
	out["envelope"] = reflect.TypeOf(Command{})
	return out
}

// filler sets every exported field of a value, recursively, to a random
// non-zero value. Types it does not know fail the test: a new field type
// must be added here (and checked against the codec) rather than skipped.
type filler struct {
	t   *testing.T
	rnd *rand.Rand
}

func (f *filler) str() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789/-_. é"
	n := 1 + f.rnd.IntN(12)
	var b strings.Builder
	for range n {
		b.WriteString(string([]rune(alphabet)[f.rnd.IntN(len([]rune(alphabet)))]))
	}
	if f.rnd.IntN(8) == 0 {
		b.WriteString("\xff\xfe") // invalid UTF-8 must round-trip too
	}
	return b.String()
}

var timeType = reflect.TypeOf(time.Time{})

func (f *filler) fill(v reflect.Value, path string) {
	switch {
	case v.Type() == timeType:
		// Nanoseconds, and a non-UTC zone that the codec normalises.
		sec := 1_600_000_000 + f.rnd.Int64N(1_000_000_000)
		tm := time.Unix(sec, 1+f.rnd.Int64N(999_999_999))
		if f.rnd.IntN(2) == 0 {
			tm = tm.In(time.FixedZone("x", 7200))
		} else {
			tm = tm.UTC()
		}
		v.Set(reflect.ValueOf(tm))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := f.rnd.Int64N(1<<40) + 1
		if f.rnd.IntN(2) == 0 {
			n = -n
		}
		if v.OverflowInt(n) {
			n = 1
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n := f.rnd.Uint64() | 1
		if v.OverflowUint(n) {
			n = 1
		}
		v.SetUint(n)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(f.rnd.Float64()*1000 + 0.1)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		n := 1 + f.rnd.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 1 + f.rnd.IntN(5) {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, path+".key")
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, fmt.Sprintf("%s[%d]", path, i))
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				f.t.Fatalf("%s.%s: unexported field in a record type; the codec skips it", path, sf.Name)
			}
			f.fill(v.Field(i), path+"."+sf.Name)
		}
	default:
		f.t.Fatalf("%s: field kind %s is not covered by the codec tests; extend filler.fill", path, v.Kind())
	}
}

// normalTimes converts every time.Time inside v to UTC: what a decoded
// record holds.
func normalTimes(v reflect.Value) {
	if v.Type() == timeType {
		if v.CanSet() {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).UTC()))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			normalTimes(v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			normalTimes(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			normalTimes(e)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				normalTimes(v.Field(i))
			}
		}
	}
}

// TestCodecRoundTrip fills every field of every record and command payload
// (new fields included: the filler walks the types) with random values and
// checks that decode(encode(v)) == v, time zones normalised to UTC. A field
// the codec drops (json:"-", an unsupported type) fails here, which matters:
// a payload field that does not survive encoding never reaches followers.
func TestCodecRoundTrip(t *testing.T) {
	for name, typ := range codecTypes() {
		t.Run(name, func(t *testing.T) {
			f := &filler{t: t, rnd: rand.New(rand.NewPCG(1, uint64(len(name))))}
			for i := range 50 {
				orig := reflect.New(typ)
				f.fill(orig.Elem(), typ.Name())
				b, err := encode(orig.Interface())
				if err != nil {
					t.Fatalf("encode: %v", err)
				}
				got := reflect.New(typ)
				if err := decode(b, got.Interface()); err != nil {
					t.Fatalf("decode: %v", err)
				}
				normalTimes(orig.Elem())
				if !reflect.DeepEqual(orig.Interface(), got.Interface()) {
					t.Fatalf("round %d: round trip differs\nwant %#v\ngot  %#v", i, orig.Elem().Interface(), got.Elem().Interface())
				}
				again, err := encode(got.Interface())
				if err != nil {
					t.Fatalf("re-encode: %v", err)
				}
				if !bytes.Equal(b, again) {
					t.Fatalf("round %d: re-encoding the decoded value gives other bytes", i)
				}
			}
		})
	}
}

// TestCodecZeroValues: zero values round-trip to zero values, and omitzero
// and omitempty fields take no space (as in the JSON records before).
func TestCodecZeroValues(t *testing.T) {
	for name, typ := range codecTypes() {
		t.Run(name, func(t *testing.T) {
			zero := reflect.New(typ)
			b, err := encode(zero.Interface())
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got := reflect.New(typ)
			if err := decode(b, got.Interface()); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !got.Elem().IsZero() {
				t.Fatalf("zero value decodes as %#v", got.Elem().Interface())
			}
		})
	}
	b, err := encode(Job{FinishedAt: time.Time{}, NextRunAt: time.Time{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"finished_at", "next_run_at", "exit_code", "reason", "current_attempt"} {
		if bytes.Contains(b, []byte(field)) {
			t.Errorf("empty omitzero/omitempty field %q is encoded", field)
		}
	}
}

// TestCodecTime: times keep their nanoseconds and come back in UTC.
func TestCodecTime(t *testing.T) {
	in := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("CET", 3600))
	b, err := encode(idemRecord{JobID: "j", RecordedAt: in})
	if err != nil {
		t.Fatal(err)
	}
	var got idemRecord
	if err := decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if !got.RecordedAt.Equal(in) || got.RecordedAt.Nanosecond() != 123456789 || got.RecordedAt.Location() != time.UTC {
		t.Fatalf("time %v (%v) after round trip of %v", got.RecordedAt, got.RecordedAt.Location(), in)
	}
	if got.RecordedAt != in.UTC() {
		t.Fatalf("time %#v is not in.UTC() %#v", got.RecordedAt, in.UTC())
	}
}

// TestCodecDeterministic: the same value gives the same bytes whatever the
// insertion order of its maps, and an equal value built separately too.
func TestCodecDeterministic(t *testing.T) {
	build := func(order []int) *Job {
		j := &Job{ID: "01J", State: JobQueued, SubmittedAt: t0, Spec: JobSpec{
			Command: []string{"true"}, Env: map[string]string{}, Labels: map[string]string{},
			Resources: Resources{Named: map[string]int64{}}}}
		for _, i := range order {
			k := fmt.Sprintf("k%d", i*7919%1000)
			j.Spec.Env[k] = k
			j.Spec.Labels[strings.Repeat("x", i%5)+k] = k
			j.Spec.Resources.Named[k] = int64(i)
		}
		return j
	}
	var order []int
	for i := range 200 {
		order = append(order, i)
	}
	first, err := encode(build(order))
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(7, 7))
	for range 20 {
		rnd.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		b, err := encode(build(order))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, b) {
			t.Fatal("the same job with maps filled in another order encodes differently")
		}
	}
	sr := SetReasons{Reasons: map[string]string{}}
	for i := range 100 {
		sr.Reasons[fmt.Sprint(i)] = "r"
	}
	c1, err := NewCommand(CmdSetReasons, t0, sr)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		c2, err := NewCommand(CmdSetReasons, t0, sr)
		if err != nil {
			t.Fatal(err)
		}
		b1, _ := c1.Encode()
		b2, _ := c2.Encode()
		if !bytes.Equal(b1, b2) {
			t.Fatal("the same command encodes differently")
		}
	}
}

// TestCodecCorrupt: garbage, truncated and bit-flipped records decode to
// an ErrCorrupt error or (for a flip that still parses) a value, never a
// panic; commands give ErrBadCommand or ErrUnsupportedVersion.
func TestCodecCorrupt(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	f := &filler{t: t, rnd: rnd}
	var samples [][]byte
	for _, typ := range codecTypes() {
		v := reflect.New(typ)
		f.fill(v.Elem(), typ.Name())
		b, err := encode(v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		samples = append(samples, b)
	}
	garbage := [][]byte{nil, {}, {0xff}, []byte("\x00\xffnot json"), []byte(`{"id":"x"}`), {0xbf}, {0x9f, 0x01},
		{0xa1, 0x62, 'i', 'd', 0xc1, 0x00}, {0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for _, s := range samples {
		for cut := 0; cut < len(s); cut += 1 + len(s)/40 {
			garbage = append(garbage, s[:cut])
		}
		for range 40 {
			c := append([]byte(nil), s...)
			c[rnd.IntN(len(c))] ^= byte(1 << rnd.IntN(8))
			garbage = append(garbage, c)
		}
		garbage = append(garbage, append(append([]byte(nil), s...), 0x00)) // trailing data
	}
	for name, typ := range recordTypes() {
		for i, g := range garbage {
			v := reflect.New(typ).Interface()
			err := decode(g, v)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: garbage %d: error %v does not wrap ErrCorrupt", name, i, err)
			}
			if len(g) == 0 && err == nil {
				t.Fatalf("%s: empty input decoded without error", name)
			}
		}
	}
	for i, g := range garbage {
		c, err := DecodeCommand(g)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("command garbage %d: error %v wraps no command sentinel", i, err)
			}
			continue
		}
		if p, ok := payloadTypes[c.Type]; ok {
			if err := c.DecodePayload(reflect.New(reflect.TypeOf(p)).Interface()); err != nil && !errors.Is(err, ErrBadCommand) {
				t.Fatalf("command garbage %d: payload error %v does not wrap ErrBadCommand", i, err)
			}
		}
	}
	// Trailing bytes after a whole record are corruption, not ignored.
	b, _ := encode(Queue{Name: "q", MaxRunning: 3})
	if err := decode(append(b, 0x01), &Queue{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("record with trailing data: %v, want ErrCorrupt", err)
	}
}

// FuzzDecodeCommand: no input makes DecodeCommand or a payload decode panic
// (go test -fuzz FuzzDecodeCommand ./fsm; the seeds run as a unit test).
func FuzzDecodeCommand(f *testing.F) {
	for ct, p := range payloadTypes {
		c, err := NewCommand(ct, t0, p)
		if err != nil {
			f.Fatal(err)
		}
		b, err := c.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":1,"t":"gc","at":"2025-01-01T00:00:00Z","p":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		if p, ok := payloadTypes[c.Type]; ok {
			_ = c.DecodePayload(reflect.New(reflect.TypeOf(p)).Interface())
		}
	})
}

// TestCommandTypesRegistered: every CommandType constant in the package is
// in payloadTypes, and Apply handles every registered type (the codec tests
// only see registered types).
func TestCommandTypesRegistered(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	found := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "CommandType" {
				return true
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				found++
				ct := CommandType(strings.Trim(lit.Value, `"`))
				if _, ok := payloadTypes[ct]; !ok {
					t.Errorf("%s (%s, %s) is not registered in payloadTypes (command.go)", name.Name, ct, fset.Position(name.Pos()))
				}
			}
			return true
		})
	}
	if found < len(payloadTypes) {
		t.Fatalf("found %d CommandType constants in the source, fewer than the %d registered", found, len(payloadTypes))
	}
	h := newHarness(t)
	for ct, p := range payloadTypes {
		r := h.f.Apply(h.entry(ct, p)).(*Result)
		if r.Err != nil && strings.Contains(r.Err.Error(), "unknown command type") {
			t.Errorf("%s is registered but applyEntry does not handle it: %v", ct, r.Err)
		}
	}
}

// TestCommandV1Replays: a JSON (version 1) entry written by an older binary
// still applies; a JSON entry claiming a newer version is refused clearly.
func TestCommandV1Replays(t *testing.T) {
	h := newHarness(t)
	payload, err := json.Marshal(SubmitJobs{Jobs: []NewJob{{ID: "01JV1", Spec: JobSpec{Command: []string{"true"}, Priority: 50,
		Timeout: Duration(90 * time.Second)}}}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := json.Marshal(map[string]any{"v": 1, "t": CmdSubmitJobs, "at": t0, "p": json.RawMessage(payload)})
	if err != nil {
		t.Fatal(err)
	}
	h.idx++
	if r := h.f.Apply(rawEntry(h.idx, env)).(*Result); r.Err != nil {
		t.Fatalf("v1 entry refused: %v", r.Err)
	}
	err = h.f.View(func(tx *Tx) error {
		j, err := tx.Job("01JV1")
		if err != nil {
			return err
		}
		if j.State != JobQueued || j.Spec.Timeout.D() != 90*time.Second || !j.SubmittedAt.Equal(t0) {
			return fmt.Errorf("job from a v1 entry: %+v", j)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &Command{V: 1, Type: CmdGC, At: t0}
	if _, err := c.Encode(); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("encoding a v1 command: %v, want ErrBadCommand", err)
	}
	newer, err := encMode.Marshal(Command{V: CommandVersion + 1, Type: CmdGC, At: t0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeCommand(newer); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("newer CBOR envelope: %v, want ErrUnsupportedVersion", err)
	}
}

// TestSchemaV1Upgrade: a state file (or snapshot) written with JSON records
// by an older binary opens, its records read back unchanged, and it is
// then schema 2.
func TestSchemaV1Upgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	rnd := rand.New(rand.NewPCG(5, 6))
	f := &filler{t: t, rnd: rnd}
	want := map[string]any{}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaSchemaVersion, []byte("1")); err != nil {
			return err
		}
		if err := meta.Put(metaAppliedIndex, u64(42)); err != nil {
			return err
		}
		if err := meta.Put(metaCleanShutdown, []byte("1")); err != nil {
			return err
		}
		for _, rb := range recordBuckets {
			for i := range 3 {
				rec := rb.new()
				f.fill(reflect.ValueOf(rec).Elem(), "rec")
				normalTimes(reflect.ValueOf(rec).Elem())
				b, err := json.Marshal(rec)
				if err != nil {
					return err
				}
				// encoding/json replaced invalid UTF-8; compare with what
				// it actually stored.
				stored := rb.new()
				if err := json.Unmarshal(b, stored); err != nil {
					return err
				}
				k := fmt.Sprintf("%s-%d", rb.name, i)
				want[k] = stored
				if err := tx.Bucket(rb.name).Put([]byte(k), b); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	fs, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("open schema 1 file: %v", err)
	}
	defer fs.Close()
	if fs.AppliedIndex() != 42 {
		t.Fatalf("applied index %d after upgrade, want 42", fs.AppliedIndex())
	}
	err = fs.View(func(tx *Tx) error {
		if v := string(tx.tx.Bucket(bucketMeta).Get(metaSchemaVersion)); v != fmt.Sprint(SchemaVersion) {
			return fmt.Errorf("schema version %q after upgrade", v)
		}
		for _, rb := range recordBuckets {
			for i := range 3 {
				k := fmt.Sprintf("%s-%d", rb.name, i)
				got := rb.new()
				if err := decode(tx.tx.Bucket(rb.name).Get([]byte(k)), got); err != nil {
					return err
				}
				if !reflect.DeepEqual(got, want[k]) {
					return fmt.Errorf("%s after upgrade:\n got %#v\nwant %#v", k, got, want[k])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
