package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	ucli "github.com/urfave/cli/v2"

	"github.com/foreman-sched/foreman/certs"
)

// loadTLS reads --tls-cert, --tls-key and --tls-ca: all three or none.
func loadTLS(c *ucli.Context) (*certs.Store, error) {
	f := certs.Files{Cert: c.String("tls-cert"), Key: c.String("tls-key"), CA: c.String("tls-ca")}
	if f.Cert == "" && f.Key == "" && f.CA == "" {
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, errors.New("--tls-cert, --tls-key and --tls-ca: give all three (or none)")
	}
	s, err := certs.Load(f)
	if err != nil {
		return nil, err
	}
	if !certs.IsServer(s.Leaf()) {
		return nil, fmt.Errorf("--tls-cert %s: not an agent certificate (make one with `foreman tls cert create --server`)", f.Cert)
	}
	return s, nil
}

// gossipKeys decodes --gossip-key values (base64).
func gossipKeys(list []string) ([][]byte, error) {
	var keys [][]byte
	for i, k := range list {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			// Never echo the value: it is a secret.
			return nil, fmt.Errorf("--gossip-key #%d: not valid base64", i+1)
		}
		if l := len(b); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("--gossip-key #%d: %d bytes; want 16, 24 or 32 (make one with `foreman tls gossip-key`)", i+1, l)
		}
		keys = append(keys, b)
	}
	return keys, nil
}

// reloadOnSIGHUP reloads the agent's certificate, key and CA each time the
// process gets SIGHUP, until ctx ends. A failed reload keeps the old
// material and says why.
func reloadOnSIGHUP(ctx context.Context, s *certs.Store, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if err := s.Reload(); err != nil {
				logger.Error("TLS reload failed; keeping the certificate in use", "component", "agent", "err", err)
				continue
			}
			leaf := s.Leaf()
			logger.Info("TLS certificate reloaded", "component", "agent", "serial", leaf.SerialNumber.String(),
				"not_after", leaf.NotAfter.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}
}
