package cli

import (
	"encoding/json"
	"io"
)

// jsonLine writes one compact JSON value per line (JSON Lines): the shape
// of every --json output (see printer).
type jsonLine struct{ w io.Writer }

func (j jsonLine) write(v any) error { return json.NewEncoder(j.w).Encode(v) }
