package main

import "fmt"

// HumanEval/9: the running maximum of a list of integers.
func rolling_max(numbers []int) []int {
	result := make([]int, 0, len(numbers))
	if len(numbers) == 0 {
		return result
	}
	running := numbers[0]
	for _, n := range numbers {
		if n > running {
			running = n
		}
		result = append(result, running)
	}
	return result
}

func main() {
	fmt.Println(rolling_max([]int{1, 2, 3, 2, 3, 4, 2}))
}
