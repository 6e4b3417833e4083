package translator

import (
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// AccessLoggerStdout is the access logger of listeners with ir.Listener.AccessLog.
const AccessLoggerStdout = "envoy.access_loggers.stdout"

// The fields of an access log line (one JSON object per line on Envoy's stdout). "listener"
// is the listener's stat prefix (the tenant object and port it serves), "cluster" the
// backend's (namespace/Service/port); HTTP lines add the request and the route that took it
// (the hub Route's name, its rule and path).
var (
	accessLogCommon = map[string]string{
		"start_time":     "%START_TIME%",
		"duration_ms":    "%DURATION%",
		"client":         "%DOWNSTREAM_REMOTE_ADDRESS%",
		"upstream_host":  "%UPSTREAM_HOST%",
		"cluster":        "%UPSTREAM_CLUSTER%",
		"bytes_received": "%BYTES_RECEIVED%",
		"bytes_sent":     "%BYTES_SENT%",
		"flags":          "%RESPONSE_FLAGS%",
	}
	accessLogHTTP = map[string]string{
		"route":      "%ROUTE_NAME%",
		"method":     "%REQ(:METHOD)%",
		"authority":  "%REQ(:AUTHORITY)%",
		"path":       "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%",
		"protocol":   "%PROTOCOL%",
		"status":     "%RESPONSE_CODE%",
		"request_id": "%REQ(X-REQUEST-ID)%",
		"user_agent": "%REQ(USER-AGENT)%",
	}
)

// accessLog returns the access log of a listener's TCP proxy or HTTP connection manager: JSON
// lines on Envoy's stdout, each naming the listener (statPrefix); nil when off.
func accessLog(on, http bool, statPrefix string, errs *[]error) []*accesslogv3.AccessLog {
	if !on {
		return nil
	}
	fields := map[string]any{"listener": statPrefix}
	for k, v := range accessLogCommon {
		fields[k] = v
	}
	if http {
		for k, v := range accessLogHTTP {
			fields[k] = v
		}
	}
	format, err := structpb.NewStruct(fields)
	if err != nil {
		*errs = append(*errs, err)
		return nil
	}
	stdout := &streamv3.StdoutAccessLog{AccessLogFormat: &streamv3.StdoutAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: format},
	}}}
	return []*accesslogv3.AccessLog{{
		Name:       AccessLoggerStdout,
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: mustPack(errs, stdout)},
	}}
}
