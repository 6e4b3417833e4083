package conditiondoc

import (
	"bytes"
	"fmt"
)

// Render returns the conditions reference, docs/conditions.md.
func Render() []byte {
	var b bytes.Buffer
	b.WriteString("# Conditions and reasons\n\n")
	b.WriteString("<!-- Generated from internal/conditiondoc (the table the CRD test checks): `make generate` rewrites this file. -->\n\n")
	b.WriteString("The conditions the manager writes on kubelb's objects, by kind, with every reason and what it\n")
	b.WriteString("means. `kubectl explain <kind>.<field>` prints the same list from the CRD schema, and\n")
	b.WriteString("`kubectl get kubelb -A` shows the Ready and Programmed columns. What to do about each is in\n")
	b.WriteString("[troubleshooting.md](troubleshooting.md).\n")
	for _, k := range Kinds {
		fmt.Fprintf(&b, "\n## %s (`%s`)\n", k.Kind, k.Field)
		for _, c := range k.Conditions {
			fmt.Fprintf(&b, "\n### %s\n\n%s.", c.Type, capitalize(c.Meaning))
			if c.Problems {
				b.WriteString(" When False, the reason may also be that of the first [translation problem](#translation-problems).")
			}
			b.WriteString("\n\n| Reason | Status | Meaning |\n|---|---|---|\n")
			for _, r := range c.Reasons {
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Name, r.Status, r.Meaning)
			}
		}
	}
	b.WriteString("\n## Translation problems\n\n")
	b.WriteString("Problems the translation finds in a LoadBalancer or Route. A False `Programmed` condition takes\n")
	b.WriteString("the reason of the first problem that keeps a port or listener from being served; its message\n")
	b.WriteString("lists every problem, and a Warning Event goes with each new one.\n\n")
	b.WriteString("| Reason | Meaning |\n|---|---|\n")
	for _, r := range TranslationProblems {
		fmt.Fprintf(&b, "| `%s` | %s |\n", r.Name, r.Meaning)
	}
	return b.Bytes()
}

func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
