package logging

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestJSONLogsWriteDurationsReadably(t *testing.T) {
	var b bytes.Buffer
	log, err := New(&b, Settings{Level: "info", Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	log.Info("stopping", "timeout", 30*time.Second, "took", 1500*time.Microsecond, "n", 3)
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if m["timeout"] != "30s" || m["took"] != "1.5ms" || m["n"] != float64(3) || m["msg"] != "stopping" {
		t.Errorf("log line %s: want timeout \"30s\", took \"1.5ms\", n 3", b.String())
	}
}
