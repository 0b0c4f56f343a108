// Package svgdoc reads an SVG document back into a tree of elements, so
// tests can check what a chart draws: its axes, series, labels and legend.
package svgdoc

import (
	"encoding/xml"
	"io"
)

// Node is an XML element.
type Node struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []Node     `xml:",any"`
}

// Parse decodes one document.
func Parse(r io.Reader) (*Node, error) {
	var n Node
	if err := xml.NewDecoder(r).Decode(&n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Attr returns the value of the attribute with the given local name, or "".
func (n *Node) Attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// Walk calls f for n and every element below it, in document order.
func (n *Node) Walk(f func(*Node)) {
	f(n)
	for i := range n.Nodes {
		n.Nodes[i].Walk(f)
	}
}

// Find returns the elements below n (n included) with the given class.
func (n *Node) Find(class string) []*Node {
	var out []*Node
	n.Walk(func(m *Node) {
		if m.Attr("class") == class {
			out = append(out, m)
		}
	})
	return out
}

// Texts returns the text of the <text> elements below n.
func (n *Node) Texts() []string {
	var out []string
	n.Walk(func(m *Node) {
		if m.XMLName.Local == "text" {
			out = append(out, m.Text)
		}
	})
	return out
}
