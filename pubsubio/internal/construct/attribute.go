package construct

import (
	"fmt"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// CheckAttribute returns the error of option, which names an attribute
// (name), when Pub/Sub would refuse name as an attribute key, or it is
// blank: no message could carry it, so the option would silently do
// nothing. instead says what to set (e.g. "name the attribute holding the
// event time, or leave it empty for publish times"). An empty name is
// valid: the option is unset.
func CheckAttribute(option, name, instead string) error {
	switch {
	case name == "":
		return nil
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%s %q is blank, so no message carries it; %s", option, name, instead)
	}
	if problem := model.AttributeKeyProblem(name); problem != "" {
		return fmt.Errorf("%s %q %s, so no message can carry it; %s", option, text.Truncate(name, text.MaxQuoted), problem, instead)
	}
	return nil
}
