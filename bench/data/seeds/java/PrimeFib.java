public class PrimeFib {
    static boolean isPrime(long n) {
        if (n < 2) {
            return false;
        }
        for (long k = 2; k * k <= n; k++) {
            if (n % k == 0) {
                return false;
            }
        }
        return true;
    }

    static long primeFib(int n) {
        long a = 0;
        long b = 1;
        int count = 0;
        while (true) {
            long next = a + b;
            a = b;
            b = next;
            if (isPrime(a)) {
                count++;
                if (count == n) {
                    return a;
                }
            }
        }
    }

    public static void main(String[] args) {
        for (int i = 1; i <= 6; i++) {
            System.out.println(i + " " + primeFib(i));
        }
    }
}
