import { describe, expect, it } from 'vitest';
import { captionContent, editContent, messageContent, textContent } from './content.ts';

describe('what a typed message becomes', () => {
  it('plain text has no formatted_body', () => {
    expect(textContent('just words, and a second line\nhere')).toEqual({ msgtype: 'm.text', body: 'just words, and a second line\nhere' });
  });

  it('markdown goes as formatted_body beside the text as typed', () => {
    const content = textContent('**bold** _italic_ `code` [link](https://example.org/)');
    expect(content).toMatchObject({ msgtype: 'm.text', body: '**bold** _italic_ `code` [link](https://example.org/)', format: 'org.matrix.custom.html' });
    expect(content['formatted_body']).toBe('<strong>bold</strong> <em>italic</em> <code>code</code> <a href="https://example.org/">link</a>');
  });

  it('HTML typed is sent as text, never as markup', () => {
    const content = textContent('*hi* <img src=x onerror=alert(1)>');
    expect(content['formatted_body']).not.toContain('<img');
    expect(content['formatted_body']).toContain('&#60;img');
  });

  it('/me is an emote; a reply names its message; an edit carries the new content', () => {
    expect(messageContent('waves', { emote: true })).toEqual({ msgtype: 'm.emote', body: 'waves' });
    expect(messageContent('yes', { replyTo: '$a' })).toEqual({ msgtype: 'm.text', body: 'yes', 'm.relates_to': { 'm.in_reply_to': { event_id: '$a' } } });
    expect(editContent('$a', 'fixed', false)).toEqual({ msgtype: 'm.text', body: '* fixed', 'm.new_content': { msgtype: 'm.text', body: 'fixed' }, 'm.relates_to': { rel_type: 'm.replace', event_id: '$a' } });
  });
});

describe('a file\u2019s caption (Matrix v1.10 media captions)', () => {
  it('without a caption, body and filename are the file\u2019s name', () => {
    expect(captionContent('kettle.png')).toEqual({ body: 'kettle.png', filename: 'kettle.png' });
    expect(captionContent('kettle.png', '   ')).toEqual({ body: 'kettle.png', filename: 'kettle.png' });
    // A caption that is the name would read as no caption: it is sent as none.
    expect(captionContent('kettle.png', 'kettle.png')).toEqual({ body: 'kettle.png', filename: 'kettle.png' });
  });

  it('with one, body is the caption (trimmed), its markdown as formatted_body, and filename the name', () => {
    expect(captionContent('kettle.png', ' Freshly descaled \n')).toEqual({ body: 'Freshly descaled', filename: 'kettle.png' });
    expect(captionContent('kettle.png', 'Freshly **descaled**')).toEqual({ body: 'Freshly **descaled**', format: 'org.matrix.custom.html', formatted_body: 'Freshly <strong>descaled</strong>', filename: 'kettle.png' });
  });
});
