package cluster

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
)

// slogWriter adapts the line-oriented loggers of raft (hclog) and
// memberlist (log.Logger) to slog, keeping their own level prefix.
func slogWriter(logger *slog.Logger, component string) io.Writer {
	return &lineWriter{logger: logger.With("component", component)}
}

type lineWriter struct{ logger *slog.Logger }

func (w *lineWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := string(line)
		level := slog.LevelInfo
		switch {
		case strings.Contains(s, "[ERR"):
			level = slog.LevelError
		case strings.Contains(s, "[WARN"):
			level = slog.LevelWarn
		case strings.Contains(s, "[DEBUG"), strings.Contains(s, "[TRACE"):
			level = slog.LevelDebug
		}
		w.logger.Log(context.Background(), level, s)
	}
	return len(p), nil
}
