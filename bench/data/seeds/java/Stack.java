public class Stack {
    private int[] items;
    private int size;

    public Stack(int capacity) {
        items = new int[capacity];
        size = 0;
    }

    public void push(int value) {
        if (size == items.length) {
            int[] bigger = new int[items.length * 2 + 1];
            for (int i = 0; i < size; i++) {
                bigger[i] = items[i];
            }
            items = bigger;
        }
        items[size] = value;
        size++;
    }

    public int pop() {
        if (size == 0) {
            throw new IllegalStateException("empty stack");
        }
        size--;
        return items[size];
    }

    public boolean isEmpty() {
        return size == 0;
    }

    public static void main(String[] args) {
        Stack s = new Stack(2);
        for (int i = 0; i < 5; i++) {
            s.push(i * i);
        }
        while (!s.isEmpty()) {
            System.out.println(s.pop());
        }
    }
}
