package exec

import (
	"errors"
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
