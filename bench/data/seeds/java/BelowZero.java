public class BelowZero {
    public static boolean belowZero(int[] operations) {
        int balance = 0;
        for (int i = 0; i < operations.length; i++) {
            balance += operations[i];
            if (balance < 0) {
                return true;
            }
        }
        return false;
    }

    public static void main(String[] args) {
        int[] ops = {1, 2, -4, 5};
        System.out.println(belowZero(ops));
    }
}
