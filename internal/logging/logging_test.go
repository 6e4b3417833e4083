package logging

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/go-logr/logr/funcr"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func TestParseLevel(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]zapcore.Level{"debug": zapcore.DebugLevel, "info": zapcore.InfoLevel, "warn": zapcore.WarnLevel,
		"WARNING": zapcore.WarnLevel, "error": zapcore.ErrorLevel, "0": zapcore.InfoLevel, "3": zapcore.Level(-3)} {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "verbose", "-1", "2x"} {
		if _, err := ParseLevel(in); err == nil {
			t.Errorf("ParseLevel(%q) accepted", in)
		}
	}
}

// TestWarn: through controller-runtime's zap logger a warning is at level warn, with the
// logger's name and values; under another sink it is an info line marked warning=true.
func TestWarn(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := zap.New(zap.WriteTo(&buf), zap.JSONEncoder()).WithName("kubelb").WithValues("tenant", "a")
	Warn(log, "careful", "flag", "--x")
	var entry map[string]any
	if err := json.Unmarshal(buf.Bytes(), &entry); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	if entry["level"] != "warn" || entry["logger"] != "kubelb" || entry["tenant"] != "a" || entry["flag"] != "--x" || entry["msg"] != "careful" {
		t.Errorf("entry = %v", entry)
	}

	var line string
	Warn(funcr.New(func(prefix, args string) { line = args }, funcr.Options{}), "careful")
	if line != `"level"=0 "msg"="careful" "warning"=true` {
		t.Errorf("funcr line = %s", line)
	}
}
