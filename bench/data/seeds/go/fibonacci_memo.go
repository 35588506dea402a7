package main

import "fmt"

var memo = map[int]int{0: 0, 1: 1}

// HumanEval/55: the n-th Fibonacci number, memoized in a package-level map.
func fib(n int) int {
	if v, ok := memo[n]; ok {
		return v
	}
	v := fib(n-1) + fib(n-2)
	memo[n] = v
	return v
}

func is_prime(n int) bool {
	if n < 2 {
		return false
	}
	for k := 2; k*k <= n; k++ {
		if n%k == 0 {
			return false
		}
	}
	return true
}

// HumanEval/39: the n-th number that is both a Fibonacci number and prime.
func prime_fib(n int) int {
	count := 0
	i := 0
	for count < n {
		i++
		if is_prime(fib(i)) {
			count++
		}
	}
	return fib(i)
}

func main() {
	for i := 1; i <= 5; i++ {
		fmt.Printf("%d %d\n", i, prime_fib(i))
	}
}
