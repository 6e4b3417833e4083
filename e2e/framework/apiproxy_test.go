package framework

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"kubelb.dev/kubelb/internal/testsupport"
)

// echoUpstream answers every line with the same line.
func echoUpstream(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line and reads the answer within wait.
func roundTrip(c net.Conn, r *bufio.Reader, wait time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

// TestAPIProxyBlackHole: while cut, the proxy accepts connections and delivers nothing either
// way (open connections are frozen, new ones held); Restore closes what lived through the cut
// and forwards again.
func TestAPIProxyBlackHole(t *testing.T) {
	upstream := echoUpstream(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := newAPIProxy(l, upstream)
	t.Cleanup(p.Close)

	before, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	br := bufio.NewReader(before)
	if got, err := roundTrip(before, br, 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("before the cut: %q, %v", got, err)
	}

	p.Cut()
	// A frozen connection gets no answer; a new one is accepted and gets none either.
	if got, err := roundTrip(before, br, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an open connection answered during the cut: %q, %v", got, err)
	}
	during, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatalf("the cut refused a connection: %v", err)
	}
	defer during.Close()
	dr := bufio.NewReader(during)
	if got, err := roundTrip(during, dr, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a new connection answered during the cut: %q, %v", got, err)
	}
	testsupport.Eventually(t, 5*time.Second, "the proxy to count what reached it", func() error {
		if s := p.Stats(); s.Connections != 1 || s.Bytes == 0 {
			return errors.New(s.String())
		}
		return nil
	})

	stats := p.Restore()
	if stats.Closed != 2 {
		t.Errorf("restore closed %d connections, want the 2 that lived through the cut", stats.Closed)
	}
	for name, c := range map[string]net.Conn{"open before": before, "opened during": during} {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := bufio.NewReader(c).ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the connection %s the cut was not closed by the restore: %v", name, err)
		}
	}
	after, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got, err := roundTrip(after, bufio.NewReader(after), 5*time.Second); err != nil || got != "ping\n" {
		t.Fatalf("after the restore: %q, %v", got, err)
	}
}
