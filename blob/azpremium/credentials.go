package azpremium

import (
	"errors"
	"strings"
)

// Secret is a credential string. It prints as REDACTED, so Options can be
// logged.
type Secret string

func (Secret) String() string   { return "REDACTED" }
func (Secret) GoString() string { return `"REDACTED"` }

type connectionString struct {
	account, key, sas, endpoint string
}

// parseConnectionString reads an Azure Storage connection string. Its errors
// name fields, never values.
func parseConnectionString(cs string) (connectionString, error) {
	var out connectionString
	fields := map[string]string{}
	for part := range strings.SplitSeq(cs, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return out, errors.New("a field lacks '='")
		}
		fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if fields["UseDevelopmentStorage"] == "true" {
		fields["AccountName"] = "devstoreaccount1"
		fields["AccountKey"] = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
		fields["BlobEndpoint"] = "http://127.0.0.1:10000/devstoreaccount1"
	}
	out.account, out.key, out.sas, out.endpoint = fields["AccountName"], fields["AccountKey"], fields["SharedAccessSignature"], fields["BlobEndpoint"]
	if out.endpoint == "" && out.account != "" {
		proto := cmpOr(fields["DefaultEndpointsProtocol"], "https")
		suffix := cmpOr(fields["EndpointSuffix"], "core.windows.net")
		out.endpoint = proto + "://" + out.account + ".blob." + suffix
	}
	if out.key == "" && out.sas == "" {
		return out, errors.New("neither AccountKey nor SharedAccessSignature")
	}
	return out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
