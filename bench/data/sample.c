/* A small linked-list program in the grammask C subset. */
struct node {
    int value;
    const char *label;
    struct node *next;
};

enum color { RED, GREEN = 2, BLUE, };

static int counts[3] = { 0, 0, 0 };
static const char *names[] = { "red", "green\t", "blue\x21" };

int push(struct node **head, struct node *item, int value) {
    item->value = value;
    item->next = *head;
    *head = item;
    return item->value;
}

// Sum the list, skipping negative values and stopping at a sentinel.
long sum_list(struct node *p) {
    long total = 0L;
    for (; p != 0; p = p->next) {
        if (p->value < 0)
            continue;
        else if (p->value == 0xFFu)
            break;
        total += (long)p->value * 2 + (p->value >> 1 & 0x0f);
    }
    return total;
}

int classify(char c) {
    switch (c) {
    case 'a': case '\'':
        return RED;
    case '\n':
        counts[GREEN - 1]++;
        return GREEN;
    default:
        break;
    }
    return c >= '0' && c <= '9' ? BLUE : -1;
}

int main(void) {
    struct node nodes[4];
    struct node *head = 0;
    int i = 0;
    double scale = 1.5e-3 + .25;
    do {
        push(&head, &nodes[i], i * 3 - 1);
        i = i + 1;
    } while (i < 4);
    while (--i >= 0) {
        counts[classify(names[i % 3][0]) + 1] += (int)(scale * sizeof(struct node));
    }
    return sum_list(head) > 10 ? 0 : 1;
}
/* end of sample.c */
