package testenv

// This file reads an SVG document back into a tree of elements for the
// tests of the charts (internal/lab/svg) and of the reports that embed
// them (internal/lab).

import "encoding/xml"

// SVGNode is an XML element of an SVG document, decoded with
// encoding/xml, so tests can check what a chart draws: its axes, series,
// labels and legend.
type SVGNode struct {
	XMLName xml.Name
	Attrs   []xml.Attr `xml:",any,attr"`
	Text    string     `xml:",chardata"`
	Nodes   []SVGNode  `xml:",any"`
}

// Attr returns the value of the attribute with the given local name, or "".
func (n *SVGNode) Attr(name string) string {
	for _, a := range n.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// Walk calls f for n and every element below it, in document order.
func (n *SVGNode) Walk(f func(*SVGNode)) {
	f(n)
	for i := range n.Nodes {
		n.Nodes[i].Walk(f)
	}
}

// Find returns the elements below n (n included) with the given class.
func (n *SVGNode) Find(class string) []*SVGNode {
	var out []*SVGNode
	n.Walk(func(m *SVGNode) {
		if m.Attr("class") == class {
			out = append(out, m)
		}
	})
	return out
}

// Texts returns the text of the <text> elements below n.
func (n *SVGNode) Texts() []string {
	var out []string
	n.Walk(func(m *SVGNode) {
		if m.XMLName.Local == "text" {
			out = append(out, m.Text)
		}
	})
	return out
}
