package main

import "fmt"
import "strings"

// Count how often each word occurs in a text, ignoring case, and report the most frequent one.
func word_count(text string) (map[string]int, string) {
	counts := make(map[string]int)
	best := ""
	for _, word := range strings.Fields(strings.ToLower(text)) {
		counts[word]++
		if counts[word] > counts[best] || (counts[word] == counts[best] && word < best) {
			best = word
		}
	}
	return counts, best
}

func main() {
	counts, best := word_count("the cat and the hat and the bat")
	fmt.Println(len(counts), best, counts[best])
}
