package cli

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/api"
	"github.com/foreman-sched/foreman/fsm"
)

func operatorCommand() *ucli.Command {
	cmd := operatorSnapshotCommand()
	cmd.Subcommands = append(cmd.Subcommands, gossipKeyCommand(), raftDumpCommand())
	return cmd
}

func operatorSnapshotCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "operator",
		Usage: "back up and restore the cluster's state; rotate the gossip key; read a stopped agent's raft log",
		Subcommands: []*ucli.Command{{
			Name:  "snapshot",
			Usage: "save, inspect and restore snapshots of the whole state",
			Subcommands: []*ucli.Command{
				ClientCommand("save", "save a snapshot of the whole state (taken by the leader now) to FILE", "FILE", snapshotSave, JSONFlag),
				{
					Name:      "inspect",
					Usage:     "check a snapshot file and print what it holds (no agent needed)",
					ArgsUsage: "FILE",
					Flags:     []ucli.Flag{JSONFlag},
					Action:    func(c *ucli.Context) error { return Error(snapshotInspect(c)) },
				},
				ClientCommand("restore", "replace the whole state of the cluster with the snapshot in FILE", "FILE", snapshotRestore,
					JSONFlag, &ucli.BoolFlag{Name: "force", Usage: "replace a state that holds jobs (they are lost)"}),
			},
		}},
	}
}

func raftCommands() []*ucli.Command {
	return []*ucli.Command{
		ClientCommand("remove-peer", "remove a server that is gone for good from the raft configuration (refused if it would lose quorum)", "NAME|RAFT-ADDRESS",
			func(c *ucli.Context) error {
				name, err := oneArg(c, "NAME")
				if err != nil {
					return err
				}
				return call(c, func(cl *api.Client) (api.RemovePeerResponse, error) {
					return api.RemovePeerResponse{Removed: name}, cl.RemovePeer(c.Context, name)
				}, func(api.RemovePeerResponse) error {
					_, err := fmt.Fprintf(Stdout(c), "removed %s from the raft configuration\n", name)
					return err
				})
			}, JSONFlag),
		ClientCommand("transfer-leadership", "hand leadership to another voter (refused for non-voters and voters that do not answer)", "",
			func(c *ucli.Context) error {
				if c.NArg() > 0 {
					return Exitf(2, "transfer-leadership takes no arguments (got %q); name the target with --to", c.Args().Slice())
				}
				return call(c, func(cl *api.Client) (api.TransferResponse, error) {
					leader, err := cl.TransferLeadership(c.Context, c.String("to"))
					return api.TransferResponse{Leader: leader}, err
				}, func(r api.TransferResponse) error {
					_, err := fmt.Fprintf(Stdout(c), "leader is now %s\n", r.Leader)
					return err
				})
			}, JSONFlag, &ucli.StringFlag{Name: "to", Usage: "the voter to lead (default: any healthy voter)"}),
	}
}

// snapshotClient is the API client without a response-header timeout: the
// leader answers a save or restore only when the snapshot is taken or
// installed, which grows with the state.
func snapshotClient(c *ucli.Context) (*api.Client, error) {
	cl, err := newClient(c)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := ClientTLS(c)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		DialContext:     (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig: tlsCfg,
	}}
	// The token and namespace of --token/--namespace (or FOREMAN_TOKEN...).
	opts := ClientOptions(c)
	opts.HTTPClient = hc
	return NewClient(cl.Address(), opts)
}

// snapshotSave downloads into FILE.tmp, checks the file (a transfer cut
// short fails its checksum) and only then renames it to FILE.
func snapshotSave(c *ucli.Context) error {
	path, cl, err := argClient(c, "FILE", snapshotClient)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := cl.SaveSnapshot(c.Context, f); err != nil {
		return fmt.Errorf("save snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	hdr, size, err := checkBackupFile(tmp)
	if err != nil {
		return fmt.Errorf("the downloaded snapshot is unusable: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	done = true
	if c.Bool("json") {
		return PrintJSON(c, snapshotView{File: path, FileSize: size, BackupHeader: hdr})
	}
	fmt.Fprintf(Stdout(c), "saved snapshot at index %d (term %d, %d jobs, %d bytes) to %s\n",
		hdr.Index, hdr.Term, hdr.Counts.Jobs, size, path)
	return nil
}

// checkBackupFile verifies a backup file's checksum and header.
func checkBackupFile(path string) (fsm.BackupHeader, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return fsm.BackupHeader{}, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fsm.BackupHeader{}, 0, err
	}
	hdr, err := fsm.ReadBackup(f, io.Discard)
	return hdr, st.Size(), err
}

// snapshotView is what save and inspect print with --json.
type snapshotView struct {
	File     string `json:"file"`
	FileSize int64  `json:"file_size"`
	fsm.BackupHeader
}

func snapshotInspect(c *ucli.Context) error {
	path, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	img, err := os.CreateTemp("", "foreman-inspect-*.db")
	if err != nil {
		return err
	}
	defer os.Remove(img.Name())
	hdr, err := fsm.ReadBackup(f, img)
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The header's counts are the leader's; open the image to prove it
	// restores, and show what it holds.
	info, err := fsm.CheckImage(img.Name(), nil, nil)
	if err != nil {
		return err
	}
	hdr.Counts = info.Counts
	if c.Bool("json") {
		return PrintJSON(c, snapshotView{File: path, FileSize: st.Size(), BackupHeader: hdr})
	}
	kv := NewTable(Stdout(c))
	kv.Row("File:", fmt.Sprintf("%s (%d bytes)", filepath.Base(path), st.Size()))
	kv.Row("Index:", hdr.Index)
	kv.Row("Term:", hdr.Term)
	kv.Row("Created:", hdr.CreatedAt.Format(time.RFC3339)+" by "+orDash(hdr.Node))
	kv.Row("Cluster ID:", orDash(hdr.ClusterID))
	kv.Row("Schema version:", hdr.SchemaVersion)
	kv.Row("State size:", fmt.Sprintf("%d bytes", hdr.Size))
	var states []string
	for _, s := range slices.Sorted(maps.Keys(hdr.Counts.JobsByState)) {
		states = append(states, fmt.Sprintf("%s %d", s, hdr.Counts.JobsByState[s]))
	}
	jobs := fmt.Sprint(hdr.Counts.Jobs)
	if len(states) > 0 {
		jobs += " (" + strings.Join(states, ", ") + ")"
	}
	kv.Row("Jobs:", jobs)
	kv.Row("Attempts:", fmt.Sprintf("%d (%d live)", hdr.Counts.Attempts, hdr.Counts.LiveAttempts))
	kv.Row("Nodes:", fmt.Sprintf("%d %s", hdr.Counts.Nodes, strings.Join(hdr.Counts.NodeNames, ",")))
	kv.Row("Queues:", hdr.Counts.Queues)
	kv.Row("Idempotency keys:", hdr.Counts.IdempotencyKeys)
	return kv.Flush()
}

func snapshotRestore(c *ucli.Context) error {
	path, err := oneArg(c, "FILE")
	if err != nil {
		return err
	}
	// Refuse a bad file here, before sending it anywhere.
	if _, _, err := checkBackupFile(path); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cl, err := snapshotClient(c)
	if err != nil {
		return err
	}
	res, err := cl.RestoreSnapshot(c.Context, f, c.Bool("force"))
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Code == api.CodeRefused && !c.Bool("force") {
			return fmt.Errorf("%s (--force)", ae.Message)
		}
		return fmt.Errorf("restore: %w", err)
	}
	if c.Bool("json") {
		return PrintJSON(c, res)
	}
	fmt.Fprintf(Stdout(c), "restored snapshot index %d (%d jobs) at raft index %d\n",
		res.Snapshot.Index, res.Snapshot.Counts.Jobs, res.Index)
	if res.Replaced.Jobs > 0 {
		fmt.Fprintf(Stdout(c), "replaced %d jobs (%d not finished)\n", res.Replaced.Jobs, res.Replaced.Unfinished())
	}
	if len(res.DeadNodes) > 0 {
		fmt.Fprintf(Stdout(c), "nodes not in this cluster, restored dead (their running jobs are re-queued): %s\n",
			strings.Join(res.DeadNodes, ", "))
	}
	return nil
}

// gossipKeyCommand is `operator gossip-key list|install|use|remove`: the
// gossip key rotated on every alive node without a restart
// (docs/security.md, "Rotation").
func gossipKeyCommand() *ucli.Command {
	change := func(op, usage string) *ucli.Command {
		return ClientCommand(op, usage, "KEY|-", func(c *ucli.Context) error { return gossipKeyOp(c, op) }, JSONFlag)
	}
	cmd := commandGroup("gossip-key", "rotate the gossip encryption key on every alive node: install NEW, use NEW, remove OLD",
		ClientCommand("list", "every alive node's gossip keys, by fingerprint (* = the primary key, which encrypts)", "",
			func(c *ucli.Context) error { return gossipKeyOp(c, "list") }, JSONFlag),
		change("install", "add KEY to every node's keyring (it decrypts; the primary key still encrypts)"),
		change("use", "make KEY the primary (encrypting) key on every node; refused unless every node has it installed"),
		change("remove", "remove KEY from every node's keyring; refused while a node uses it as primary"),
	)
	cmd.Description = "KEY is base64 (foreman tls gossip-key makes one); - reads it from stdin, which keeps it out of ps.\n" +
		"Each node saves its keyring in its data dir, which overrides --gossip-key from then on."
	return cmd
}

func gossipKeyOp(c *ucli.Context, op string) error {
	var key string
	if op != "list" {
		if c.NArg() != 1 {
			return Exitf(2, "gossip-key %s takes one argument: the key (base64) or - to read it from stdin", op)
		}
		key = c.Args().First()
		if key == "-" {
			b, err := io.ReadAll(io.LimitReader(c.App.Reader, 4096))
			if err != nil {
				return Exitf(1, "reading the key from stdin: %v", err)
			}
			key = strings.TrimSpace(string(b))
		}
	} else if c.NArg() > 0 {
		return Exitf(2, "gossip-key list takes no arguments (got %q)", c.Args().Slice())
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	var res *api.GossipKeysResponse
	if op == "list" {
		res, err = cl.GossipKeys(c.Context)
	} else {
		res, err = cl.GossipKeyOp(c.Context, op, key)
	}
	if err != nil {
		return Error(err)
	}
	if c.Bool("json") {
		if err := PrintJSON(c, res); err != nil {
			return err
		}
	} else {
		w := Stdout(c)
		for _, n := range res.Nodes {
			if n.Error != "" {
				fmt.Fprintf(w, "%-16s error: %s\n", n.Node, n.Error)
				continue
			}
			var ks []string
			for _, k := range n.Keys {
				if k.Primary {
					ks = append(ks, k.Fingerprint+"*")
				} else {
					ks = append(ks, k.Fingerprint)
				}
			}
			fmt.Fprintf(w, "%-16s %s\n", n.Node, strings.Join(ks, " "))
		}
	}
	if !res.OK {
		var failed []string
		for _, n := range res.Nodes {
			if n.Error != "" {
				failed = append(failed, n.Node)
			}
		}
		return Exitf(1, "gossip-key %s failed on %s (run it again: every step is idempotent)", op, strings.Join(failed, ", "))
	}
	return nil
}
