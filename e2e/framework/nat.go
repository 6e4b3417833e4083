package framework

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"

	"kubelb.dev/kubelb/internal/testenv"
)

// natTable is the nft table PlayOneToOneNAT keeps in the test's network namespace.
const natTable = "kubelb-e2e-nat"

// PlayOneToOneNAT plays a cloud's 1:1 NAT in the test's private network namespace (see
// PrivateNetwork): a packet sent to a public address, which is on no interface, has its
// destination rewritten to the private address mapped to it, as a cloud's NAT does before
// the packet reaches the node. It writes nft rules into the namespace's own ruleset (never
// the machine's). The private addresses are the namespace's local range (10.244.0.0/15, see
// SetupNetns): the API server refuses loopback externalIPs. The rules go when the test ends.
func PlayOneToOneNAT(t testenv.TB, publicToPrivate map[string]string) {
	t.Helper()
	if os.Getenv(InNetnsEnv) == "" {
		t.Fatal("PlayOneToOneNAT runs only in the test's private network namespace (framework.PrivateNetwork)")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		nft = "/usr/sbin/nft" // Debian's, off the PATH of users other than root
		if _, err := os.Stat(nft); err != nil {
			t.Fatal("nft not found on $PATH nor in /usr/sbin: run `make tools` (hack/tools.sh nftables installs Debian's nftables)")
		}
	}
	publics := make([]string, 0, len(publicToPrivate))
	for pub, priv := range publicToPrivate {
		for _, a := range []string{pub, priv} {
			if ip, err := netip.ParseAddr(a); err != nil || !ip.Is4() {
				t.Fatalf("PlayOneToOneNAT takes IPv4 addresses, not %q", a)
			}
		}
		if ip := netip.MustParseAddr(priv); !netnsLocal.Contains(ip) {
			t.Fatalf("private address %s is outside the namespace's local range %s", priv, netnsLocal)
		}
		publics = append(publics, pub)
	}
	sort.Strings(publics)
	var rules strings.Builder
	fmt.Fprintf(&rules, "table ip %s {\n  chain output {\n    type nat hook output priority -100; policy accept;\n", natTable)
	for _, pub := range publics {
		fmt.Fprintf(&rules, "    ip daddr %s dnat to %s\n", pub, publicToPrivate[pub])
	}
	rules.WriteString("  }\n}\n")
	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(rules.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -f (the played NAT):\n%s\n%v: %s", rules.String(), err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(nft, "delete", "table", "ip", natTable).CombinedOutput(); err != nil {
			t.Logf("removing the played NAT: %v: %s", err, out)
		}
	})
}
