public class BubbleSort {
    public static void sort(int[] values) {
        boolean swapped = true;
        int end = values.length - 1;
        while (swapped) {
            swapped = false;
            for (int i = 0; i < end; i++) {
                if (values[i] > values[i + 1]) {
                    int tmp = values[i];
                    values[i] = values[i + 1];
                    values[i + 1] = tmp;
                    swapped = true;
                }
            }
            end--;
        }
    }

    public static String join(int[] values, String sep) {
        String out = "";
        for (int i = 0; i < values.length; i++) {
            out = out + (i > 0 ? sep : "") + values[i];
        }
        return out;
    }

    public static void main(String[] args) {
        int[] values = {5, 3, 8, 1, 9, 2, 7};
        sort(values);
        System.out.println(join(values, ", "));
    }
}
