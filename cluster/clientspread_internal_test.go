package cluster

import (
	"fmt"
	"testing"
)

// planMoves sheds only a surplus beyond the tolerance, down to the share,
// to the servers below it in proportion to what each lacks, at most
// MovesPerRound at a time.
func TestPlanMoves(t *testing.T) {
	lim := SpreadLimits{}.withDefaults()
	srv := func(counts ...int) []SpreadServer {
		var out []SpreadServer
		for i, c := range counts {
			out = append(out, SpreadServer{Name: fmt.Sprintf("s%d", i), HTTPAddr: fmt.Sprintf("h%d", i), Clients: c})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		mine    int
		servers []SpreadServer
		lim     SpreadLimits
		want    string
	}{
		{"even", 100, srv(100, 100, 100), lim, ""},
		{"within tolerance", 109, srv(109, 100, 91), lim, ""},
		{"restarted last holds none", 150, srv(150, 150, 0), SpreadLimits{MovesPerRound: 1000, Tolerance: 0.1}, "h2:50"},
		{"bounded per round", 2500, srv(2500, 2500, 0), lim, "h2:50"},
		{"own count, not the leader's", 85, srv(150, 100, 50), lim, ""},
		{"two lacking, by what each lacks", 300, srv(300, 50, 100), SpreadLimits{MovesPerRound: 1000, Tolerance: 0.1}, "h1:100,h2:50"},
		{"not in the view", 300, []SpreadServer{{Name: "x", Clients: 0}, {Name: "y", Clients: 0}}, lim, ""},
		{"alone", 300, srv(300), lim, ""},
		{"one client", 1, srv(1, 0, 0), lim, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			for _, m := range planMoves("s0", tc.mine, tc.servers, tc.lim) {
				if got != "" {
					got += ","
				}
				got += fmt.Sprintf("%s:%d", m.to.HTTPAddr, m.clients)
			}
			if got != tc.want {
				t.Errorf("plan %q, want %q", got, tc.want)
			}
		})
	}
}
