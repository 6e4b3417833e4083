// Package logging holds what both binaries' logs share beyond controller-runtime's logr: the
// levels of --log-level, and Warn, which writes a warning at zap's warn level.
//
// logr has only Info (at a verbosity) and Error, so a warning logged with Info reads as
// "info" in a JSON log and cannot be kept apart from routine lines. Warn writes through the
// zap logger under controller-runtime's logr sink instead: the line carries "level":"warn",
// keeps the logger's name and values, and --log-level=warn shows warnings and errors only.
// Under any other sink (tests' logr.Discard, funcr) it falls back to Info with warning=true.
package logging

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Levels are the names --log-level accepts, besides a number (a verbosity: higher is more
// verbose).
var Levels = []string{"debug", "info", "warn", "error"}

// ParseLevel reads a --log-level value: a name of Levels, or a number n >= 0 (logr's V(n)
// lines and below are written; 0 is info, 1 debug).
func ParseLevel(s string) (zapcore.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != s {
		return 0, fmt.Errorf("invalid value %q for flag --log-level: want one of %s, or a number", s, strings.Join(Levels, ", "))
	}
	return zapcore.Level(-n), nil
}

// underlier is what zapr's sink (controller-runtime's) offers: its zap logger.
type underlier interface {
	GetUnderlying() *zap.Logger
}

// Warn logs msg with key/value pairs at warn level.
func Warn(log logr.Logger, msg string, keysAndValues ...any) {
	if u, ok := log.GetSink().(underlier); ok {
		u.GetUnderlying().Sugar().Warnw(msg, keysAndValues...)
		return
	}
	log.Info(msg, append([]any{"warning", true}, keysAndValues...)...)
}
