package config

import "strconv"

func strconvI(n int64) string { return strconv.FormatInt(n, 10) }

func boolS(b bool) string { return strconv.FormatBool(b) }
