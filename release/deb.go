package release

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Debian package layout. The agent runs as root (containers, cgroups and
// job users need it); the foreman system user and group own the data dir,
// so an agent limited to the process driver can run as User=foreman from a
// drop-in. The unit is installed but not enabled: the example config names
// example addresses and must be edited first (docs/operations.md,
// "Installing a release").
const (
	debBinary     = "usr/bin/foreman"
	debUnit       = "lib/systemd/system/foreman.service"
	debConfig     = "etc/foreman/agent.yaml"
	debDataDir    = "var/lib/foreman"
	debDocDir     = "usr/share/doc/foreman"
	debMaintainer = "foreman-sched <foreman-sched@users.noreply.github.com>"
	debHomepage   = "https://github.com/foreman-sched/foreman"
)

const debPostinst = `#!/bin/sh
# foreman: make the foreman system user and group, give them the data dir.
set -e
if [ "$1" = configure ]; then
	if ! getent passwd foreman >/dev/null; then
		adduser --system --group --quiet --home /var/lib/foreman --no-create-home \
			--gecos "foreman agent" foreman
	fi
	chown foreman:foreman /var/lib/foreman
	chmod 0700 /var/lib/foreman
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
`

const debPrerm = `#!/bin/sh
# foreman: stop the agent before its binary goes (running jobs keep running
# under their supervisors until their lease ends: KillMode=process).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop foreman.service >/dev/null 2>&1 || true
fi
exit 0
`

const debPostrm = `#!/bin/sh
# foreman: forget the unit. The data dir, the config and the user stay
# (a purge removes the config; the data dir holds the cluster's state).
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
`

// debInput is what one architecture's package holds.
type debInput struct {
	version string // the Debian version (debVersion)
	arch    string // Debian architecture: amd64, arm64
	binary  []byte
	unit    []byte // already pointing at /usr/bin/foreman
	config  []byte
	readme  []byte
	license []byte // nil when the tree has none
	mtime   time.Time
}

// buildDeb returns a .deb (an ar archive of debian-binary, control.tar.gz
// and data.tar.gz, as dpkg-deb writes it) made only of in.
func buildDeb(in debInput) ([]byte, error) {
	data := []file{
		{name: debBinary, mode: 0o755, data: in.binary},
		{name: debUnit, mode: 0o644, data: in.unit},
		{name: debConfig, mode: 0o644, data: in.config},
		{name: debDataDir, mode: 0o700, dir: true},
		{name: debDocDir + "/README.md", mode: 0o644, data: in.readme},
	}
	if in.license != nil {
		data = append(data, file{name: debDocDir + "/copyright", mode: 0o644, data: in.license})
	}
	dataTar, err := tarGz(data, tarOptions{mtime: in.mtime, prefix: "./"})
	if err != nil {
		return nil, err
	}
	installed := 0
	var sums []string
	for _, f := range data {
		installed += (len(f.data) + 1023) / 1024
		if !f.dir {
			sums = append(sums, fmt.Sprintf("%x  %s\n", md5.Sum(f.data), f.name))
		}
	}
	sort.Strings(sums)
	control := fmt.Sprintf(`Package: foreman
Version: %s
Architecture: %s
Maintainer: %s
Installed-Size: %d
Depends: adduser
Section: admin
Priority: optional
Homepage: %s
Description: distributed job scheduler in one static binary
 foreman runs batch jobs, cron schedules and workflows (DAGs) on a cluster
 of hosts: embedded Raft over a bbolt state machine, runc's libcontainer
 for containers, memberlist gossip. No database, no broker, no Docker.
 .
 This package installs the binary, a systemd unit (not enabled) and an
 example /etc/foreman/agent.yaml to edit before starting the agent.
`, in.version, in.arch, debMaintainer, installed, debHomepage)
	ctl := []file{
		{name: "control", mode: 0o644, data: []byte(control)},
		{name: "conffiles", mode: 0o644, data: []byte("/" + debConfig + "\n")},
		{name: "md5sums", mode: 0o644, data: []byte(strings.Join(sums, ""))},
		{name: "postinst", mode: 0o755, data: []byte(debPostinst)},
		{name: "prerm", mode: 0o755, data: []byte(debPrerm)},
		{name: "postrm", mode: 0o755, data: []byte(debPostrm)},
	}
	ctlTar, err := tarGz(ctl, tarOptions{mtime: in.mtime, prefix: "./"})
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.WriteString("!<arch>\n")
	for _, m := range []struct {
		name string
		data []byte
	}{
		{"debian-binary", []byte("2.0\n")},
		{"control.tar.gz", ctlTar},
		{"data.tar.gz", dataTar},
	} {
		fmt.Fprintf(&buf, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, in.mtime.Unix(), 0, 0, "100644", len(m.data))
		buf.Write(m.data)
		if len(m.data)%2 == 1 {
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes(), nil
}

// debUnitFile is contrib/foreman.service as the package installs it: the
// binary at /usr/bin/foreman, and a header that says where it came from.
func debUnitFile(contrib []byte) ([]byte, error) {
	const from, to = "ExecStart=/usr/local/bin/foreman ", "ExecStart=/usr/bin/foreman "
	s := string(contrib)
	if strings.Count(s, from) != 1 {
		return nil, fmt.Errorf("contrib/foreman.service: want one line starting %q", from)
	}
	s = strings.Replace(s, from, to, 1)
	// Drop the leading comment (install instructions for the tarball).
	lines := strings.SplitAfter(s, "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "#") {
		lines = lines[1:]
	}
	head := "# Installed by the foreman Debian package. Edit /etc/foreman/agent.yaml, then\n" +
		"# systemctl enable --now foreman. Changes go in a drop-in: systemctl edit foreman.\n"
	return []byte(head + strings.Join(lines, "")), nil
}
