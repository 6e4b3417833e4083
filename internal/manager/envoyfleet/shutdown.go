package envoyfleet

import (
	"fmt"
	"time"
)

// DrainScript is the preStop hook of the Envoy container (run with bash -c). Envoy exits at
// once on SIGTERM, so before the kubelet sends it the hook asks Envoy's admin interface on
// loopback to drain its listeners gracefully (POST /drain_listeners?graceful; Envoy's
// --drain-time-s bounds the drain), waits minDrain so load balancers stop sending new
// connections, then waits until no listener has a downstream connection open, at most
// drainTimeout in all. It needs only bash (its /dev/tcp), no curl: the envoyproxy/envoy image
// has it, the distroless image does not (the hook then fails and Envoy stops at once).
func DrainScript(adminPort int, minDrain, drainTimeout time.Duration) string {
	return fmt.Sprintf(`set -u
admin() {
  exec 3<>/dev/tcp/127.0.0.1/%[1]d || return 1
  printf '%%s %%s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n' "$1" "$2" >&3
  cat <&3
  exec 3<&-
}
admin POST '/drain_listeners?graceful' >/dev/null || exit 0
end=$((SECONDS + %[3]d))
sleep %[2]d
while [ "$SECONDS" -lt "$end" ]; do
  active=0
  while IFS=': ' read -r name value; do
    value=${value%%$'\r'}
    case "$value" in ''|*[!0-9]*) continue ;; esac
    case "$name" in
      listener.admin.*) ;;
      listener.*.downstream_cx_active) active=$((active + value)) ;;
    esac
  done < <(admin GET '/stats?filter=downstream_cx_active')
  [ "$active" -eq 0 ] && exit 0
  sleep 1
done
exit 0
`, adminPort, int(minDrain/time.Second), int(drainTimeout/time.Second))
}
