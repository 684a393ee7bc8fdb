package exec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckUser(t *testing.T) {
	cases := []struct {
		allowed      []string
		user, driver string
		ok           bool
	}{
		{nil, "root", ProcessDriverName, true},
		{[]string{"*"}, "root", ProcessDriverName, true},
		{[]string{"nobody"}, "nobody", ProcessDriverName, true},
		{[]string{"nobody"}, "nobody:nogroup", ProcessDriverName, true},
		{[]string{"nobody"}, "root", ProcessDriverName, false},
		{[]string{"nobody"}, "0", ContainerDriverNameForTest, false},
		{[]string{"nobody"}, "", ProcessDriverName, false}, // would run as the agent
		{[]string{"nobody"}, "", ContainerDriverNameForTest, true},
	}
	for _, tc := range cases {
		w := &Worker{cfg: WorkerConfig{Node: "n1", JobUsers: tc.allowed}}
		err := w.checkUser(tc.user, tc.driver)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUserNotAllowed)) {
			t.Errorf("allowed %v, user %q, driver %s: err = %v, want ok=%v", tc.allowed, tc.user, tc.driver, err, tc.ok)
		}
	}
}

// ContainerDriverNameForTest stands for any driver other than process.
const ContainerDriverNameForTest = "container"

func TestCheckJobUsers(t *testing.T) {
	for _, tc := range []struct {
		allowed []string
		def     string
		ok      bool
	}{
		{[]string{"nobody"}, "nobody", true},
		{[]string{"*"}, "65534", true},
		{[]string{"nobody"}, "", true},
		{[]string{"nobody"}, "root", false},
		{[]string{"*"}, "no-such-user-foreman", false},
	} {
		err := CheckJobUsers(tc.allowed, tc.def)
		if (err == nil) != tc.ok {
			t.Errorf("CheckJobUsers(%v, %q) = %v, want ok %v", tc.allowed, tc.def, err, tc.ok)
		}
	}
}

// A data dir under dirs others cannot search (mktemp -d makes 0700) is out
// of reach of every job user but root, and the error names every such dir
// and the fix; searchable parents are fine.
func TestCheckJobUserReach(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} { // the test's own dirs
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if d := unsearchableAbove(filepath.Join(base, "x")); len(d) > 0 {
		t.Skipf("the temp dir itself is under %v, which others cannot search", d)
	}
	open, tight, inner := filepath.Join(base, "open"), filepath.Join(base, "tight"), filepath.Join(base, "tight", "inner")
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{open, 0o755}, {tight, 0o700}, {inner, 0o700}} {
		if err := os.Mkdir(d.path, d.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		dataDir, user string
		blocking      string // "": reachable
	}{
		{filepath.Join(open, "data"), "nobody", ""},
		{filepath.Join(tight, "data"), "nobody", tight + " is"},
		{filepath.Join(tight, "data"), "65534", tight + " is"},
		{filepath.Join(tight, "a", "data"), "nobody:nogroup", tight + " is"}, // a parent not made yet
		{filepath.Join(inner, "data"), "nobody", tight + " " + inner + " are"},
		{filepath.Join(tight, "data"), "root", ""},
		{filepath.Join(tight, "data"), "0:0", ""},
	} {
		err := CheckJobUserReach(tc.dataDir, tc.user)
		if tc.blocking == "" {
			if err != nil {
				t.Errorf("%s as %s: %v", tc.dataDir, tc.user, err)
			}
			continue
		}
		dirs := strings.TrimSuffix(strings.TrimSuffix(tc.blocking, " is"), " are")
		if !errors.Is(err, ErrJobUserCannotReach) || !strings.Contains(err.Error(), tc.blocking+" not searchable") ||
			!strings.Contains(err.Error(), "chmod o+x "+dirs+",") || !strings.Contains(err.Error(), `"`+tc.user+`"`) {
			t.Errorf("%s as %s: %v, want ErrJobUserCannotReach naming %q, the user and chmod o+x", tc.dataDir, tc.user, err, tc.blocking)
		}
	}
}
