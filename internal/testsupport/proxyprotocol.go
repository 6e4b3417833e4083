package testsupport

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// ProxyV2Header is a PROXY protocol v2 header for a TCP connection over IPv4 from src (port
// 40000) to 127.0.0.1:80, as a load balancer before the hub writes it.
func ProxyV2Header(src string) []byte {
	a := netip.MustParseAddr(src).As4()
	h := append([]byte(nil), proxyV2Signature...)
	h = append(h, 0x21, 0x11, 0, 12) // version 2, PROXY; TCP over IPv4; 12 bytes of addresses
	h = append(h, a[:]...)
	h = append(h, 127, 0, 0, 1)
	h = binary.BigEndian.AppendUint16(h, 40000)
	return binary.BigEndian.AppendUint16(h, 80)
}

// ProxiedGet sends GET / for host on its own connection to addr, after header (none when
// empty: a PROXY protocol header, say), and returns the status; an error when the connection
// is closed without an answer.
func ProxiedGet(addr, host string, header []byte) (int, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := append(append([]byte(nil), header...), "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"...)
	if _, err := conn.Write(req); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ProxiedRoundTrip sends header (none when empty: a PROXY protocol header, say), then msg and
// a newline, on its own connection to addr, and checks that a TCP backend echoed msg.
func ProxiedRoundTrip(addr string, header []byte, msg string) error {
	c, err := net.DialTimeout("tcp", addr, RoundTripTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(RoundTripTimeout))
	if _, err := c.Write(append(append([]byte(nil), header...), msg+"\n"...)); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no answer from %s: %w", addr, err)
	}
	_, err = parseEcho(strings.TrimSuffix(line, "\n"), msg)
	return err
}
