package principal

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// attribute is one AttributeTypeAndValue of a name, its value kept as
// encoded.
type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is a relative distinguished name: a SET OF attributes
// (encoding/asn1 reads a slice type whose name ends in SET as a SET OF).
type rdnSET []attribute

// keywords are the attribute types written by name in RFC 2253 form, the
// ones RFC 2253 defines, as Java's X500Principal.getName() writes them.
var keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.1":  "UID",
	"0.9.2342.19200300.100.1.25": "DC",
}

// Universal ASN.1 string tags that are written as text.
const (
	tagUTF8String      = 12
	tagPrintableString = 19
	tagT61String       = 20
	tagIA5String       = 22
	tagGeneralString   = 27
	tagBMPString       = 30
)

// SubjectDN returns the subject of cert as a distinguished name in RFC 2253
// form, as Java's X500Principal.getName() writes it and Kafka matches its
// mapping rules against: the most specific RDN first, RDNs separated by
// ',' and the attributes of a multi-valued RDN by '+' (in their encoded
// order), no spaces, for example "CN=alice,OU=eng,O=acme,C=US".
//
// The types CN, C, L, ST, STREET, O, OU, UID and DC are written by name;
// every other type (emailAddress, serialNumber, ...) is written as its
// dotted OID with the value as '#' and the hexadecimal of its DER encoding,
// e.g. "1.2.840.113549.1.9.1=#16...". A value of a known type that is not
// a string type is written in the same '#' form. A string value is written
// with a backslash before each of , = + < > # ; " and \, before leading
// and trailing spaces and carriage returns, and with a NUL as "\00"; other
// characters, non-ASCII ones included, are written as they are. Invalid
// UTF-8 becomes U+FFFD.
//
// One difference from the JDK: the JDK decodes the octets of every string
// type as UTF-8, which garbles a BMPString (UCS-2); here a BMPString is
// decoded as UTF-16. Certificates made by security/pki and by usual tools
// use PrintableString and UTF8String, for which the two agree.
//
// SubjectDN returns "" for a nil certificate, an empty subject, or a
// subject that cannot be decoded (which crypto/x509 already refuses when
// parsing a certificate); FromCert tells these apart.
func SubjectDN(cert *x509.Certificate) string {
	dn, _ := subjectDN(cert)
	return dn
}

func subjectDN(cert *x509.Certificate) (string, error) {
	if cert == nil {
		return "", errors.New("principal: no certificate")
	}
	raw := cert.RawSubject
	if len(raw) == 0 { // a certificate built in memory, not parsed
		var err error
		if raw, err = asn1.Marshal(cert.Subject.ToRDNSequence()); err != nil {
			return "", fmt.Errorf("principal: encode subject: %w", err)
		}
	}
	var seq []rdnSET
	rest, err := asn1.Unmarshal(raw, &seq)
	if err != nil {
		return "", fmt.Errorf("principal: decode subject: %w", err)
	}
	if len(rest) != 0 {
		return "", errors.New("principal: decode subject: trailing data")
	}
	var b strings.Builder
	for i := len(seq) - 1; i >= 0; i-- {
		if i < len(seq)-1 {
			b.WriteByte(',')
		}
		for j, a := range seq[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAttribute(&b, a)
		}
	}
	return b.String(), nil
}

func writeAttribute(b *strings.Builder, a attribute) {
	oid := a.Type.String()
	keyword, known := keywords[oid]
	if !known {
		keyword = oid
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	if known {
		if s, ok := stringValue(a.Value); ok {
			b.WriteString(escapeValue(s))
			return
		}
	}
	b.WriteByte('#')
	b.WriteString(hex.EncodeToString(a.Value.FullBytes))
}

// stringValue decodes a value of a string type.
func stringValue(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return "", false
	}
	switch v.Tag {
	case tagUTF8String, tagPrintableString, tagT61String, tagIA5String, tagGeneralString:
		return validUTF8(v.Bytes), true
	case tagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	}
	return "", false
}

// validUTF8 returns b as a string with each invalid byte replaced by
// U+FFFD.
func validUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var s strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		s.WriteRune(r)
		b = b[n:]
	}
	return s.String()
}

// escapeValue escapes a string value as Java's RFC 2253 writer does (see
// SubjectDN): special characters and NUL first, then the leading and
// trailing spaces and carriage returns of the result.
func escapeValue(v string) string {
	var esc []rune
	for _, r := range v {
		switch r {
		case ',', '=', '+', '<', '>', '#', ';', '"', '\\':
			esc = append(esc, '\\', r)
		case 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, r)
		}
	}
	edge := func(r rune) bool { return r == ' ' || r == '\r' }
	lead := 0
	for lead < len(esc) && edge(esc[lead]) {
		lead++
	}
	trail := len(esc) - 1
	for trail >= 0 && edge(esc[trail]) {
		trail--
	}
	var b strings.Builder
	for i, r := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
