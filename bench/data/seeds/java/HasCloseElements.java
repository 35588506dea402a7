public class HasCloseElements {
    public static boolean hasCloseElements(double[] numbers, double threshold) {
        for (int i = 0; i < numbers.length; i++) {
            for (int j = i + 1; j < numbers.length; j++) {
                if (Math.abs(numbers[i] - numbers[j]) < threshold) {
                    return true;
                }
            }
        }
        return false;
    }

    public static void main(String[] args) {
        double[] a = {1.0, 2.0, 3.9, 4.0, 5.0, 2.2};
        System.out.println(hasCloseElements(a, 0.3));
        System.out.println(hasCloseElements(a, 0.05));
    }
}
