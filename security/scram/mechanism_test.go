package scram

import "testing"

func TestMechanism(t *testing.T) {
	for _, tc := range []struct {
		m    Mechanism
		name string
		code int8
	}{
		{SHA256, "SCRAM-SHA-256", 1},
		{SHA512, "SCRAM-SHA-512", 2},
	} {
		if tc.m.String() != tc.name || tc.m.KafkaCode() != tc.code {
			t.Errorf("%d: %q, %d", tc.m, tc.m.String(), tc.m.KafkaCode())
		}
		if m, ok := MechanismFromKafka(tc.code); !ok || m != tc.m {
			t.Errorf("MechanismFromKafka(%d) = %v, %t", tc.code, m, ok)
		}
		if m, err := ParseMechanism(tc.name); err != nil || m != tc.m {
			t.Errorf("ParseMechanism(%q) = %v, %v", tc.name, m, err)
		}
	}
	if SHA256 != 0 || SHA512 != 1 {
		t.Error("mechanism values changed")
	}
	for _, code := range []int8{0, 3, -1, 127} {
		if m, ok := MechanismFromKafka(code); ok {
			t.Errorf("MechanismFromKafka(%d) = %v", code, m)
		}
	}
	for _, s := range []string{"", "scram-sha-256", "SCRAM-SHA-1", "SCRAM-SHA-256-PLUS", "PLAIN", " SCRAM-SHA-512"} {
		if m, err := ParseMechanism(s); err == nil {
			t.Errorf("ParseMechanism(%q) = %v", s, m)
		}
	}
	if s := Mechanism(7).String(); s != "Mechanism(7)" {
		t.Errorf("String of 7: %q", s)
	}
	if c := Mechanism(7).KafkaCode(); c != 0 {
		t.Errorf("KafkaCode of 7: %d", c)
	}
}
