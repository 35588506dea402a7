package main

import "fmt"

// HumanEval/3: does the balance of a bank account, starting at zero, ever fall below zero?
func below_zero(operations []int) bool {
	balance := 0
	for _, op := range operations {
		balance += op
		if balance < 0 {
			return true
		}
	}
	return false
}

func main() {
	fmt.Println(below_zero([]int{1, 2, -4, 5}))
	fmt.Println(below_zero([]int{1, 2, 3}))
}
