package translator

import (
	"encoding/json"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Plain turns resources into generic values for people (golden files, `kubectl kubelb
// translate -o yaml`): every resource through protojson (snake_case field names, as in
// Envoy's docs) and then through a generic map, so key order is sorted and the result is
// byte-stable (protojson's own output deliberately is not).
func Plain(rs []types.Resource) ([]any, error) {
	list := make([]any, 0, len(rs))
	for _, r := range rs {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(r.(proto.Message))
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		list = append(list, v)
	}
	return list, nil
}
