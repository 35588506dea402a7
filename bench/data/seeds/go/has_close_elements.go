package main

import "fmt"
import "math"

// HumanEval/0: are any two numbers in the list closer to each other than the threshold?
func has_close_elements(numbers []float64, threshold float64) bool {
	for i := 0; i < len(numbers); i++ {
		for j := i + 1; j < len(numbers); j++ {
			if math.Abs(numbers[i]-numbers[j]) < threshold {
				return true
			}
		}
	}
	return false
}

func main() {
	fmt.Println(has_close_elements([]float64{1.0, 2.0, 3.9, 4.0, 5.0, 2.2}, 0.3))
	fmt.Println(has_close_elements([]float64{1.0, 2.0, 3.0}, 0.5))
}
